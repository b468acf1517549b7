"""Issue 33 §4, the basics of a good web UI: the main pages fit a 390 px wide phone without
horizontal scrolling, repeated links and buttons have names that say which row they act on,
a skip link jumps to the content, "/" focuses the page's search box (and does nothing where
there is none), and the favicon is a static file (works offline)."""

import pytest
from playwright.sync_api import expect

from executions.models import Execution
from executions.services import schedules
from tests.support import factories, helpers

pytest_plugins = ["tests.support.browser"]
pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(180)]

PHONE = {"width": 390, "height": 844}


def _scene():
    workspace = factories.default_workspace()
    parent = helpers.run_fanout(workspace, 25, failing={21})
    helpers.waiting_calls(workspace, 2)
    schedules.create_schedule(workspace, name="every-five-minutes-with-a-long-name", workflow="child",
                              cron="*/5 * * * *", timezone="America/Argentina/Buenos_Aires")
    return parent


def _fits(page, name):
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{name}: the document is {width} px wide at a 390 px viewport"


def test_the_main_pages_fit_a_390_px_screen(page, ui, operator):
    parent = _scene()
    ui.log_in(operator)
    page.set_viewport_size(PHONE)
    pages = [("list", "/executions/", "#executions"), ("execution", f"/executions/{parent.pk}/", "#children-fan"),
             ("rate-limits", "/rate-limits/", "#destinations"), ("schedules", "/schedules/", "#schedules")]
    for name, path, ready in pages:
        page.goto(path)
        expect(page.locator(ready)).to_be_visible()
        page.wait_for_load_state("networkidle")
        _fits(page, name)
        ui.screenshot(f"phone-{name}", full_page=False)


def test_repeated_links_and_buttons_say_which_row(page, ui, operator):
    parent = _scene()
    ui.log_in(operator, next_path=f"/executions/{parent.pk}/")
    children = page.locator("#children-fan")
    expect(children.get_by_role("link", name="Open child #21", exact=True)).to_have_count(1)
    expect(children.get_by_role("button", name="Retry child #21", exact=True)).to_have_count(1)
    expect(children.get_by_role("link", name="Open child #3", exact=True)).to_have_count(1)
    child = Execution.objects.get(parent=parent, item_index=21)
    children.get_by_role("link", name="Open child #21", exact=True).click()
    expect(page).to_have_url(f"{page.url.split('/executions/')[0]}/executions/{child.pk}/")


def test_a_skip_link_slash_for_search_and_a_favicon(page, ui, operator):
    _scene()
    ui.log_in(operator)
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    expect(skip).to_be_focused()
    expect(skip).to_be_visible()
    ui.screenshot("basics-skip-link", full_page=False)
    page.keyboard.press("Enter")
    expect(page.locator("main")).to_be_focused()

    search = page.get_by_label("Search")
    page.keyboard.press("/")
    expect(search).to_be_focused()
    expect(search).to_have_value("")  # the key focused the box; it typed nothing
    page.keyboard.type("abc/")  # inside the box "/" is just a character
    expect(search).to_have_value("abc/")

    page.goto("/schedules/")  # no search box: the key does nothing
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement === document.body")

    icon = page.locator("link[rel=icon]")
    href = icon.get_attribute("href")
    assert href.startswith("/static/")
    answer = page.request.get(href)
    assert answer.status == 200
    assert answer.headers["content-type"].startswith("image/svg+xml")
