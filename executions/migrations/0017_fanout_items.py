"""A SPAWNER's list, one row per item (issue 14 §7): spawn batches read by key in O(batch).
The rows go with their step: the foreign key cascades in the database, so purging a tree
needs no extra statement for them."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('executions', '0016_event_delete_guard'),
    ]

    operations = [
        migrations.CreateModel(
            name='FanOutItem',
            fields=[
                ('pk', models.CompositePrimaryKey('step_id', 'item_index', blank=True, editable=False, primary_key=True, serialize=False)),
                ('item_index', models.IntegerField()),
                ('item', models.JSONField()),
                ('step', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='executions.step')),
            ],
        ),
        migrations.RunSQL(
            sql="""
                ALTER TABLE executions_fanoutitem ADD CONSTRAINT fanoutitem_step_cascade
                    FOREIGN KEY (step_id) REFERENCES executions_step (id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED;
            """,
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
