"""Operator UI routes (HTMX, server-rendered)."""

from django.urls import path
from django.views.generic import RedirectView

from executions.ui import (
    actions,
    bulk_views,
    control_actions,
    execution_views,
    priority_actions,
    rate_limits,
    run_views,
    schedule_views,
    workflow_views,
    workspace_views,
)

app_name = "ui"

execution = "executions/<uuid:execution_id>"

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="ui:execution-list"), name="home"),
    path("executions/", execution_views.execution_list, name="execution-list"),
    path("executions/rows", execution_views.execution_rows, name="execution-rows"),
    path(f"{execution}/", execution_views.execution_page, name="execution-detail"),
    # Live fragments of the execution page.
    path(f"{execution}/header", execution_views.header_fragment, name="execution-header"),
    path(f"{execution}/steps", execution_views.steps_fragment, name="execution-steps"),
    path(f"{execution}/body", execution_views.body_fragment, name="execution-body"),
    path(f"{execution}/fanouts/<str:spawner>", execution_views.fanout_fragment, name="execution-fanout"),
    path(f"{execution}/fanouts/<str:spawner>/children", execution_views.children_fragment,
         name="execution-children"),
    path(f"{execution}/long-tail", execution_views.long_tail_fragment, name="execution-long-tail"),
    path(f"{execution}/bulk", bulk_views.bulk_fragment, name="execution-bulk"),
    path(f"{execution}/run", run_views.run_fragment, name="execution-run"),
    path(f"{execution}/fanouts/<str:spawner>/throughput", run_views.throughput_fragment,
         name="execution-throughput"),
    # Actions (POST only).
    path(f"{execution}/retry", actions.retry_execution, name="execution-retry"),
    path(f"{execution}/retry-edited", actions.retry_edited, name="execution-retry-edited"),
    path(f"{execution}/cancel", actions.cancel_execution, name="execution-cancel"),
    path(f"{execution}/pause", control_actions.pause_execution, name="execution-pause"),
    path(f"{execution}/resume", control_actions.resume_execution, name="execution-resume"),
    path(f"{execution}/fanouts/<str:spawner>/edit", control_actions.edit_fanout, name="fanout-edit"),
    path(f"{execution}/priority", priority_actions.change_priority, name="execution-priority"),
    path(f"{execution}/children/cancel-open", actions.cancel_open_children, name="cancel-open-children"),
    path(f"{execution}/children/bulk", bulk_views.bulk_start, name="bulk-start"),
    path(f"{execution}/steps/<str:vertex>/retry", actions.retry_step, name="step-retry"),
    path(f"{execution}/steps/<str:vertex>/complete", actions.complete_step, name="step-complete"),
    path(f"{execution}/fanouts/<str:spawner>/retry-failed", actions.retry_failed_children,
         name="retry-failed-children"),
    path("workflows/", workflow_views.workflow_list, name="workflow-list"),
    path("schedules/", schedule_views.schedule_list, name="schedule-list"),
    path("schedules/rows", schedule_views.schedule_rows, name="schedule-rows"),
    path("schedules/<str:name>/pause", schedule_views.pause, name="schedule-pause"),
    path("schedules/<str:name>/resume", schedule_views.resume, name="schedule-resume"),
    path("schedules/<str:name>/run", schedule_views.run_now, name="schedule-run-now"),
    path("workflows/<str:key>/", workflow_views.workflow_page, name="workflow-detail"),
    path("workflows/<str:key>/start", workflow_views.start, name="workflow-start"),
    path("workflows/<str:key>/versions/<str:digest>/", workflow_views.version_page, name="version-detail"),
    path("workspace/", workspace_views.switch_workspace, name="switch-workspace"),
    path("rate-limits/", rate_limits.page, name="rate-limits"),
    path("rate-limits/counts", rate_limits.counts, name="rate-limit-counts"),
    path("rate-limits/charts", rate_limits.chart_panel, name="rate-limit-charts"),
    path("rate-limits/new", rate_limits.create, name="destination-create"),
    path("rate-limits/<int:destination_id>", rate_limits.row, name="destination-row"),
    path("rate-limits/<int:destination_id>/edit", rate_limits.edit_row, name="destination-edit"),
    path("rate-limits/<int:destination_id>/limit", rate_limits.update_limit, name="destination-limit"),
    path("rate-limits/<int:destination_id>/flow/edit", rate_limits.edit_flow, name="destination-flow-edit"),
    path("rate-limits/<int:destination_id>/flow", rate_limits.update_flow, name="destination-flow"),
    path("rate-limits/<int:destination_id>/pause", rate_limits.pause_destination, name="destination-pause"),
]
