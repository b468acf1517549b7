import psycopg
from django.apps import AppConfig
from psycopg.types.array import ListBinaryDumper


class ExecutionsConfig(AppConfig):
    name = "executions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django_q.signals import post_spawn

        from executions import kick, worker
        from executions.destinations import outbound  # noqa: F401 - outbound registers a system check
        from executions.platform import notify
        from executions.worker import runtime

        # Set-based statements send each column as one list: as a binary array (psycopg's own
        # dumper, registered last so a %s list picks it; before any connection opens), no array
        # text for Python to build nor for PostgreSQL to parse.
        psycopg.adapters.register_dumper(list, ListBinaryDumper)

        notify.on_work_created(kick.request_drain)  # work made ready wakes a drain (coalesced)
        notify.on_bulk_created(kick.request_bulk)  # a bulk operation is run by a worker
        post_spawn.connect(worker.on_worker_spawn, dispatch_uid="schemabridge-drain-on-spawn")
        runtime.install()  # before qcluster builds its queues: a SIGKILLed idle worker must not wedge them
