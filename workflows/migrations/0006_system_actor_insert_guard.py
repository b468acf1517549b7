"""Only ``manage.py sb_actor`` registers system actors (S15): a trigger refuses an INSERT
into ``workflows_systemactor`` unless the transaction has set ``schemabridge.actor_admin``
to ``on`` (``SELECT set_config('schemabridge.actor_admin', 'on', true)``), which only that
command's code path does. ``workflows.actors.register`` called from anywhere else — the
admin, a shell, a scheduled task — is refused by the database. (The UPDATE/DELETE guard of
0005 keeps names, keys and patterns unchangeable for everyone.)
"""

from django.db import migrations

GUARD = """
CREATE FUNCTION sb_system_actor_insert_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('schemabridge.actor_admin', true) IS DISTINCT FROM 'on' THEN
        RAISE EXCEPTION 'system actors are registered only with manage.py sb_actor (see docs/security.md)'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER system_actor_insert_guard
    BEFORE INSERT ON workflows_systemactor
    FOR EACH ROW EXECUTE FUNCTION sb_system_actor_insert_guard();
"""

DROP_GUARD = """
DROP TRIGGER IF EXISTS system_actor_insert_guard ON workflows_systemactor;
DROP FUNCTION IF EXISTS sb_system_actor_insert_guard();
"""


class Migration(migrations.Migration):

    dependencies = [
        ("workflows", "0005_system_actors"),
    ]

    operations = [
        migrations.RunSQL(GUARD, DROP_GUARD),
    ]
