from django.db import migrations

SQL = """
CREATE TRIGGER audit_event_immutable
    BEFORE UPDATE OR DELETE ON workflows_auditevent
    FOR EACH ROW EXECUTE FUNCTION sb_refuse_update();
"""


class Migration(migrations.Migration):
    dependencies = [("workflows", "0003_tokens_audit")]

    operations = [migrations.RunSQL(SQL, "DROP TRIGGER IF EXISTS audit_event_immutable ON workflows_auditevent;")]
