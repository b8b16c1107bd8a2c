"""Driving /docs (Swagger UI) in a browser page, as a person does: the docs page's test and the screenshots share it."""

SUMMARY = "/api/v1/payouts/summary"


def sign_in(page, base_url: str, key: str) -> None:
    """Open /docs and give the key to **Authorize**."""
    page.goto(f"{base_url}/docs")
    page.locator("button.authorize").first.click(timeout=15_000)  # Swagger UI rendered: its scripts loaded
    page.locator(".modal-ux input").first.fill(key)
    page.locator(".modal-ux button.authorize").click()
    page.locator(".modal-ux button.btn-done").click()


def try_out(page, path: str = SUMMARY):
    """The GET operation of `path`, opened with "Try it out" pressed: its parameters as the docs fill them in."""
    operation = page.locator(".opblock-get", has=page.locator(f'[data-path="{path}"]'))
    operation.locator(".opblock-summary").click()
    operation.locator("button.try-out__btn").click()
    return operation


def execute(operation):
    """Press Execute; the status cell of the answer, once shown."""
    operation.locator("button.execute").click()
    status = operation.locator(".live-responses-table .response .response-col_status").first
    status.wait_for(timeout=15_000)
    return status
