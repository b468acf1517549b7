"""Bulk operations and their ledger (issue 31 §5); the error signature of executions (issue 33 §3)."""

import django.db.models.deletion
import django.db.models.functions.datetime
import uuid
from django.db import migrations, models

# An error's signature (issue 33 §3): quoted values -> '…'; uuids, 0x… and hex words with a
# digit (hashes, ids) -> <id>; every other number -> N; an HTTP status code is put back
# ("returned HTTP 503: …" stays so). IMMUTABLE: the generated column error_signature uses it.
# Plain patterns only: a look-behind made PostgreSQL's matcher many times slower.
SIGNATURE = r"""
CREATE FUNCTION sb_error_signature(error text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $fn$
    SELECT CASE WHEN error = '' THEN '' ELSE replace(
        regexp_replace(regexp_replace(regexp_replace(left(error, 2000),
            $re$'[^']*'|"[^"]*"$re$, $re$'…'$re$, 'g'),
            $re$[0-9a-fA-F]{8}-[0-9a-fA-F-]{27}|\m0x[0-9a-fA-F]+|\m[0-9a-f]*([0-9][0-9a-f]*[a-f]|[a-f][0-9a-f]*[0-9])[0-9a-f]*\M$re$,
            '<id>', 'g'),
            '[0-9]+', 'N', 'g'),
        'HTTP N', 'HTTP ' || coalesce(substring(error FROM 'HTTP ([0-9]{3})'), 'N')) END
$fn$
"""


class Migration(migrations.Migration):

    dependencies = [
        ('executions', '0025_flowui_limit_history'),
        ('workflows', '0009_plan_upload_bytes'),
    ]

    operations = [
        migrations.RunSQL(SIGNATURE, "DROP FUNCTION sb_error_signature(text)"),
        migrations.CreateModel(
            name='BulkItem',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('position', models.IntegerField()),
                ('child', models.UUIDField()),
                ('outcome', models.CharField(choices=[('pending', 'Pending'), ('sealed', 'Sealed'), ('done', 'Done'), ('skipped', 'Skipped')], db_default='pending', max_length=8)),
                ('reason', models.CharField(blank=True, db_default='', max_length=200)),
            ],
        ),
        migrations.CreateModel(
            name='BulkOperation',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('action', models.CharField(choices=[('retry', 'Retry'), ('cancel', 'Cancel')], max_length=8)),
                ('filter', models.JSONField()),
                ('state', models.CharField(choices=[('running', 'Running'), ('succeeded', 'Succeeded')], db_default='running', max_length=12)),
                ('matched', models.PositiveIntegerField(default=0)),
                ('done', models.PositiveIntegerField(db_default=0)),
                ('skipped', models.PositiveIntegerField(db_default=0)),
                ('created_by', models.CharField(blank=True, default='', max_length=200)),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('leased_by', models.CharField(blank=True, default='', max_length=64)),
                ('lease_expires_at', models.DateTimeField(blank=True, null=True)),
            ],
        ),
        migrations.AddField(
            model_name='execution',
            name='error_signature',
            field=models.GeneratedField(db_persist=True, expression=models.Func(models.F('error'), function='sb_error_signature'), output_field=models.TextField()),
        ),
        migrations.AddIndex(
            model_name='execution',
            index=models.Index(condition=models.Q(('status', 'FAILED')), fields=['parent', 'error_signature'], name='execution_failed_signature'),
        ),
        migrations.AddField(
            model_name='bulkoperation',
            name='execution',
            field=models.ForeignKey(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='executions.execution'),
        ),
        migrations.AddField(
            model_name='bulkoperation',
            name='workspace',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='workflows.workspace'),
        ),
        migrations.AddField(
            model_name='bulkitem',
            name='operation',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='executions.bulkoperation'),
        ),
        migrations.AddIndex(
            model_name='bulkoperation',
            index=models.Index(fields=['execution', '-created_at'], name='bulk_operation_of_execution'),
        ),
        migrations.AddIndex(
            model_name='bulkoperation',
            index=models.Index(condition=models.Q(('state', 'running')), fields=['lease_expires_at'], name='bulk_operation_running'),
        ),
        migrations.AddIndex(
            model_name='bulkitem',
            index=models.Index(fields=['operation', 'outcome', 'position'], name='bulk_item_outcome'),
        ),
        migrations.AddConstraint(
            model_name='bulkitem',
            constraint=models.UniqueConstraint(fields=('operation', 'position'), name='bulk_item_unique_position'),
        ),
    ]
