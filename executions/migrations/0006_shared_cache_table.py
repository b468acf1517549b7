from django.core.management import call_command
from django.db import migrations


def create_cache_table(apps, schema_editor):
    # The shared cache (settings.CACHES) is a table; creating it here means every database
    # that is migrated — local, test, benchmark, production — has it.
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


def drop_cache_table(apps, schema_editor):
    schema_editor.execute("DROP TABLE IF EXISTS sb_cache")


class Migration(migrations.Migration):
    dependencies = [("executions", "0005_top_level_index")]

    operations = [migrations.RunPython(create_cache_table, drop_cache_table)]
