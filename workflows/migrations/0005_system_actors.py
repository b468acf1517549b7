"""System actors (S15) and the nonces of their accepted claims.

A trigger keeps a registered key what it was: name, key and patterns never change, an actor
is never deleted, and a deactivated actor stays deactivated (rotation registers a new row).
"""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models

GUARD = """
CREATE FUNCTION sb_system_actor_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'system actors are never deleted; deactivate them'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF NEW.name IS DISTINCT FROM OLD.name OR NEW.public_key IS DISTINCT FROM OLD.public_key
       OR NEW.patterns IS DISTINCT FROM OLD.patterns OR NEW.created_by IS DISTINCT FROM OLD.created_by
       OR NEW.created_at IS DISTINCT FROM OLD.created_at OR (NEW.active AND NOT OLD.active) THEN
        RAISE EXCEPTION 'a system actor''s name, key and patterns never change and a deactivated actor stays '
                        'deactivated; register or rotate instead'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER system_actor_guard
    BEFORE UPDATE OR DELETE ON workflows_systemactor
    FOR EACH ROW EXECUTE FUNCTION sb_system_actor_guard();
"""

DROP_GUARD = """
DROP TRIGGER IF EXISTS system_actor_guard ON workflows_systemactor;
DROP FUNCTION IF EXISTS sb_system_actor_guard();
"""


class Migration(migrations.Migration):

    dependencies = [
        ('workflows', '0004_audit_immutable'),
    ]

    operations = [
        migrations.CreateModel(
            name='SystemActor',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(help_text="Sent as X-SB-Actor; letters, digits, '.', '_' or '-'.", max_length=100)),
                ('public_key', models.CharField(help_text='The raw 32-byte Ed25519 public key, base64.', max_length=64, unique=True)),
                ('patterns', models.JSONField(default=list, help_text="Workflow keys it may claim: globs such as 'system.*'.")),
                ('active', models.BooleanField(default=True)),
                ('created_by', models.CharField(blank=True, default='', max_length=200)),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('deactivated_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'ordering': ['name', '-created_at'],
                'constraints': [models.UniqueConstraint(condition=models.Q(('active', True)), fields=('name',), name='system_actor_one_active_key')],
            },
        ),
        migrations.CreateModel(
            name='ClaimNonce',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('nonce', models.CharField(max_length=128)),
                ('claimed_at', models.DateTimeField(db_index=True, help_text="The claim's own (signed) timestamp.")),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('actor', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='workflows.systemactor')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('nonce',), name='claim_nonce_unique')],
            },
        ),
        migrations.RunSQL(GUARD, DROP_GUARD),
    ]
