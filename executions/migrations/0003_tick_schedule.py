from django.db import migrations


def schedule_tick(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    Schedule.objects.update_or_create(
        name="schemabridge-tick",
        defaults={"func": "executions.worker.tick", "schedule_type": "I", "minutes": 1, "repeats": -1},
    )


def unschedule_tick(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name="schemabridge-tick").delete()


class Migration(migrations.Migration):
    dependencies = [("executions", "0002_triggers"), ("django_q", "0018_task_success_index")]

    operations = [migrations.RunPython(schedule_tick, unschedule_tick)]
