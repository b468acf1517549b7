from django.db import migrations

SQL = """
-- Events are an append-only history.
CREATE TRIGGER event_append_only
    BEFORE UPDATE ON executions_event
    FOR EACH ROW EXECUTE FUNCTION sb_refuse_update();

-- Payload store size accounting: statement-level triggers with transition tables add each
-- statement's bytes to one shard per backend (an upsert, so a truncated usage table heals).
CREATE FUNCTION sb_payload_usage_add() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    delta bigint;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT coalesce(sum(size_bytes), 0) INTO delta FROM new_rows;
    ELSIF TG_OP = 'DELETE' THEN
        SELECT -coalesce(sum(size_bytes), 0) INTO delta FROM old_rows;
    ELSE
        SELECT coalesce((SELECT sum(size_bytes) FROM new_rows), 0)
             - coalesce((SELECT sum(size_bytes) FROM old_rows), 0) INTO delta;
    END IF;
    IF delta <> 0 THEN
        INSERT INTO executions_payloadusage (shard, bytes) VALUES (pg_backend_pid() % 16, delta)
        ON CONFLICT (shard) DO UPDATE SET bytes = executions_payloadusage.bytes + EXCLUDED.bytes;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER payload_usage_insert AFTER INSERT ON executions_payload
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION sb_payload_usage_add();
CREATE TRIGGER payload_usage_delete AFTER DELETE ON executions_payload
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION sb_payload_usage_add();
CREATE TRIGGER payload_usage_update AFTER UPDATE ON executions_payload
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION sb_payload_usage_add();

INSERT INTO executions_drainkick (id, last_enqueued_at) VALUES (1, now() - interval '1 hour');
"""

REVERSE = """
DROP TRIGGER IF EXISTS payload_usage_update ON executions_payload;
DROP TRIGGER IF EXISTS payload_usage_delete ON executions_payload;
DROP TRIGGER IF EXISTS payload_usage_insert ON executions_payload;
DROP FUNCTION IF EXISTS sb_payload_usage_add();
DROP TRIGGER IF EXISTS event_append_only ON executions_event;
DELETE FROM executions_drainkick WHERE id = 1;
"""


class Migration(migrations.Migration):
    dependencies = [("executions", "0001_initial"), ("workflows", "0002_immutable_versions_default_workspace")]

    operations = [migrations.RunSQL(SQL, REVERSE)]
