"""REST API routes under /api/v1/."""

from django.urls import path  # noqa: F401 - routes are added by the API module

app_name = "api"
urlpatterns: list = []
