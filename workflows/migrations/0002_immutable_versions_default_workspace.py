from django.db import migrations

IMMUTABLE_VERSIONS = """
CREATE FUNCTION sb_refuse_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% rows are immutable (% refused)', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END $$;

CREATE TRIGGER workflow_version_immutable
    BEFORE UPDATE ON workflows_workflowversion
    FOR EACH ROW EXECUTE FUNCTION sb_refuse_update();
"""

DROP = """
DROP TRIGGER IF EXISTS workflow_version_immutable ON workflows_workflowversion;
DROP FUNCTION IF EXISTS sb_refuse_update();
"""


def default_workspace(apps, schema_editor):
    Plan = apps.get_model("workflows", "Plan")
    Workspace = apps.get_model("workflows", "Workspace")
    plan, _ = Plan.objects.get_or_create(name="default", defaults={"executions_per_day": 5_000_000})
    Workspace.objects.get_or_create(slug="default", defaults={"name": "Default workspace", "plan": plan})


class Migration(migrations.Migration):
    dependencies = [("workflows", "0001_initial")]

    operations = [
        migrations.RunSQL(IMMUTABLE_VERSIONS, DROP),
        migrations.RunPython(default_workspace, migrations.RunPython.noop),
    ]
