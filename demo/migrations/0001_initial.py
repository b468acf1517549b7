import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    """Takes over the demo ledger's tables, created by ``executions`` 0001, in state only
    (no database operation: the tables and their rows stay as they are)."""

    initial = True

    dependencies = [("executions", "0007_demo_models_to_demo_app")]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="DemoLedgerEntry",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("idempotency_key", models.CharField(max_length=255, unique=True)),
                        ("entry", models.JSONField()),
                        ("created_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                    ],
                    options={"db_table": "executions_demoledgerentry"},
                ),
                migrations.CreateModel(
                    name="DemoSwitch",
                    fields=[
                        ("name", models.CharField(max_length=64, primary_key=True, serialize=False)),
                        ("on", models.BooleanField(default=False)),
                    ],
                    options={"db_table": "executions_demoswitch"},
                ),
            ],
            database_operations=[],
        ),
    ]
