# Uploads (issue 16): lists of items received as files, for a start to name with {"$upload": id}.

import uuid

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models

# Upload items count towards the payload store's live bytes (the trigger function of 0002).
SQL = """
CREATE TRIGGER upload_item_usage_insert AFTER INSERT ON executions_uploaditem
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION sb_payload_usage_add();
CREATE TRIGGER upload_item_usage_delete AFTER DELETE ON executions_uploaditem
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION sb_payload_usage_add();
"""

REVERSE = """
DROP TRIGGER IF EXISTS upload_item_usage_delete ON executions_uploaditem;
DROP TRIGGER IF EXISTS upload_item_usage_insert ON executions_uploaditem;
"""


class Migration(migrations.Migration):

    dependencies = [
        ('executions', '0012_fanout_batches_and_concurrency'),
        ('workflows', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='Upload',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('format', models.CharField(choices=[('jsonl', 'Jsonl'), ('csv', 'Csv')], max_length=8)),
                ('items', models.PositiveBigIntegerField()),
                ('bytes', models.PositiveBigIntegerField(help_text='Bytes of the body received.')),
                ('created_by', models.CharField(blank=True, default='', max_length=200)),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('last_used_at', models.DateTimeField(blank=True, null=True)),
                ('workspace', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+',
                                                to='workflows.workspace')),
            ],
            options={
                'indexes': [models.Index(fields=['created_at'], name='upload_created')],
            },
        ),
        migrations.CreateModel(
            name='UploadItem',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('index', models.PositiveIntegerField()),
                ('data', models.JSONField()),
                ('size_bytes', models.PositiveIntegerField()),
                ('upload', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                             related_name='+', to='executions.upload')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('upload', 'index'), name='upload_item_unique_index')],
            },
        ),
        migrations.RunSQL(SQL, REVERSE),
    ]
