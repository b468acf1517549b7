"""A step waiting for a signal (a merge waiting for its children) has no due time: records.HELD_UNTIL
(state.NO_DUE_TIME), so the WAITING steps' due times are the deadlines of waits for the outside
world alone, which the drain waits for like timers (issue 32). Steps that wait for a signal
already when this runs get it too."""

from django.db import migrations

NO_DUE_TIME = """
    UPDATE executions_step s SET due_at = '9999-12-31T00:00:00+00:00'::timestamptz
    WHERE s.status = 'WAITING'
      AND NOT EXISTS (SELECT 1 FROM executions_wait w WHERE w.step_id = s.id AND w.attempt = s.attempt)
"""


class Migration(migrations.Migration):

    dependencies = [
        ("executions", "0024_destination_flow_control"),
    ]

    operations = [migrations.RunSQL(NO_DUE_TIME, reverse_sql=migrations.RunSQL.noop)]
