"""A destination's config version (issue 28, section 4): bumped by the database itself in the
UPDATE that changes any column a call reads (executions/core/calls.py, FOR_CALLS), whoever
writes it, so a worker can tell that its copy of the destination's call settings is old."""

from django.db import migrations, models

SQL = """
CREATE FUNCTION sb_destination_config_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.config_version := OLD.config_version + 1;
    RETURN NEW;
END $$;

-- The columns of FOR_CALLS (executions/core/calls.py), and only those: the rate bucket a
-- claim spends, a limit or a timestamp leaves the version alone.
CREATE TRIGGER destination_config_version
    BEFORE UPDATE ON executions_destination
    FOR EACH ROW
    WHEN (OLD.name IS DISTINCT FROM NEW.name
          OR OLD.base_url IS DISTINCT FROM NEW.base_url
          OR OLD.timeout_seconds IS DISTINCT FROM NEW.timeout_seconds
          OR OLD.max_response_bytes IS DISTINCT FROM NEW.max_response_bytes
          OR OLD.credentials_sealed IS DISTINCT FROM NEW.credentials_sealed)
    EXECUTE FUNCTION sb_destination_config_version();
"""

REVERSE = """
DROP TRIGGER IF EXISTS destination_config_version ON executions_destination;
DROP FUNCTION IF EXISTS sb_destination_config_version();
"""


class Migration(migrations.Migration):

    dependencies = [
        ('executions', '0020_execution_cancel_cause'),
    ]

    operations = [
        migrations.AddField(
            model_name='destination',
            name='config_version',
            field=models.BigIntegerField(db_default=0, default=0),
        ),
        migrations.RunSQL(SQL, REVERSE),
    ]
