"""Events are an append-only history (0002 refuses UPDATE): a DELETE is refused too, except
by data retention (S19, executions/core/retention.py), which purges whole finished trees and says
so by setting ``schemabridge.retention`` to ``on`` for its transaction only
(``SELECT set_config('schemabridge.retention', 'on', true)``). A statement-level trigger: it
costs one check per DELETE statement, not per row."""

from django.db import migrations

GUARD = """
CREATE FUNCTION sb_event_delete_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('schemabridge.retention', true) IS DISTINCT FROM 'on' THEN
        RAISE EXCEPTION 'executions_event rows are append-only; only data retention deletes them (sb_gc)'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER event_delete_guard
    BEFORE DELETE ON executions_event
    FOR EACH STATEMENT EXECUTE FUNCTION sb_event_delete_guard();
"""

DROP_GUARD = """
DROP TRIGGER IF EXISTS event_delete_guard ON executions_event;
DROP FUNCTION IF EXISTS sb_event_delete_guard();
"""


class Migration(migrations.Migration):
    dependencies = [("executions", "0015_fanout_expected_bytes")]

    operations = [migrations.RunSQL(GUARD, DROP_GUARD)]
