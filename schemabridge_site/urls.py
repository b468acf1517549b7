from django.apps import apps
from django.contrib import admin
from django.contrib.auth.views import LoginView
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from schemabridge_site import probes
from workflows.logins import LoginForm

# The demo ledger and its switch exist only with SB_DEMO=1 (the demo app installed).
demo = [path("demo/", include("demo.urls"))] if apps.is_installed("demo") else []

urlpatterns = [
    path("admin/", admin.site.urls),
    # Before django.contrib.auth's own "login" route: the same view with a throttled form.
    path("accounts/login/", LoginView.as_view(authentication_form=LoginForm), name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("healthz", probes.healthz, name="healthz"),
    path("readyz", probes.readyz, name="readyz"),
    path("metrics", probes.metrics_view, name="metrics"),
    *demo,
    path("api/v1/", include("executions.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("", include("executions.ui.urls")),
]
