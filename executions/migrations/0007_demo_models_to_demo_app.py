from django.db import migrations


class Migration(migrations.Migration):
    """The demo ledger's models moved to the ``demo`` app (installed only with SB_DEMO=1).
    Their tables stay where they are, with their names: this removes the models from this
    app's state only, and ``demo``'s first migration adds them to its own."""

    dependencies = [("executions", "0006_shared_cache_table")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="DemoLedgerEntry"),
                migrations.DeleteModel(name="DemoSwitch"),
            ],
            database_operations=[],
        ),
    ]
