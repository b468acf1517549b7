"""Issue 32 and issue 31 §3 (helper wait2).

A step waiting for a signal (a merge waiting for its children) has no due time
(records.NO_DUE_TIME), so the WAITING steps' due times are the deadlines of waits for the outside
world alone, which the drain waits for like timers (issue 32). Steps that wait for a signal
already when this runs get it too.

A quorum merge (S26): the fan-out's ``min_successful``, and the cancel cause ``quorum``."""

from django.db import migrations, models

NO_DUE_TIME = """
    UPDATE executions_step s SET due_at = '9999-12-30T00:00:00+00:00'::timestamptz
    WHERE s.status = 'WAITING'
      AND NOT EXISTS (SELECT 1 FROM executions_wait w WHERE w.step_id = s.id AND w.attempt = s.attempt)
"""


class Migration(migrations.Migration):

    dependencies = [
        ("executions", "0026_bulk"),
    ]

    operations = [
        migrations.RunSQL(NO_DUE_TIME, reverse_sql=migrations.RunSQL.noop),
        migrations.AddField(
            model_name="fanout",
            name="min_successful",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="execution",
            name="cancel_cause",
            field=models.CharField(blank=True, choices=[("operator", "Operator"), ("failFast", "Fail Fast"),
                                                        ("quorum", "Quorum")], db_default="", max_length=16),
        ),
    ]
