from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from workflows import checks  # noqa: F401 - registers the system checks
        from workflows.handler_modules import load_handler_modules

        # Every process (web, workers, commands) knows the same handlers before it serves.
        load_handler_modules()
