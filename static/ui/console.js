// The operator console's forms that carry JSON (start an execution, retry with an edited
// input): the JSON is parsed here before anything is sent, and a chosen file is first
// uploaded through the API (POST /api/v1/uploads) and then named in the input as
// {"$upload": id}. The server validates everything again; this only saves a round trip.
(function () {
  "use strict";

  function csrfToken() {
    try { return JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRFToken"]; } catch (e) { return ""; }
  }

  function showError(form, message) {
    var box = form.querySelector("[data-json-error]");
    box.textContent = message;
    box.hidden = !message;
  }

  function place(input, path, value) {
    if (input === null || typeof input !== "object" || Array.isArray(input)) {
      throw new Error("the input must be a JSON object to take a file's items");
    }
    var keys = path.split(".");
    var here = input;
    for (var i = 0; i < keys.length - 1; i++) {
      if (!keys[i]) { throw new Error("the list field is keys separated by dots, e.g. entries"); }
      if (here[keys[i]] === undefined) { here[keys[i]] = {}; }
      here = here[keys[i]];
      if (here === null || typeof here !== "object" || Array.isArray(here)) {
        throw new Error("'" + keys[i] + "' in the input is not an object");
      }
    }
    if (!keys[keys.length - 1]) { throw new Error("name the list field, e.g. entries"); }
    here[keys[keys.length - 1]] = value;
  }

  function upload(form, file) {
    var csv = /\.csv$/i.test(file.name) || file.type === "text/csv";
    return fetch(form.getAttribute("data-uploads-url"), {
      method: "POST", body: file, credentials: "same-origin",
      headers: {"Content-Type": csv ? "text/csv" : "application/x-ndjson", "X-CSRFToken": csrfToken()}
    }).then(function (response) {
      return response.json().then(function (body) {
        if (!response.ok) { throw new Error(file.name + ": " + (body.detail || response.statusText)); }
        return body;
      });
    });
  }

  function submit(form) {
    var text = form.querySelector("[data-json]").value.trim() || "{}";
    var input;
    try {
      input = JSON.parse(text);
    } catch (error) {
      showError(form, "Not JSON: " + error.message);
      return;
    }
    var fileField = form.querySelector("input[type=file]");
    var file = fileField && fileField.files.length ? fileField.files[0] : null;
    var ready = Promise.resolve(input);
    if (file) {
      var at = form.querySelector("[name=items_at]").value.trim();
      // Checked before uploading, so a wrong field costs no upload.
      try { place(input, at, null); } catch (error) { showError(form, error.message); return; }
      showError(form, "");
      form.setAttribute("aria-busy", "true");
      ready = upload(form, file).then(function (created) {
        place(input, at, {"$upload": created.id});
        form.querySelector("[data-upload-note]").textContent =
          "Uploaded " + created.items + " items (" + created.bytes + " bytes).";
        return input;
      });
    }
    ready.then(function (value) {
      showError(form, "");
      form.querySelector("input[name=input]").value = JSON.stringify(value);
      htmx.trigger(form, "sb-submit");
    }).catch(function (error) {
      showError(form, error.message);
    }).finally(function () {
      form.removeAttribute("aria-busy");
    });
  }

  document.addEventListener("submit", function (event) {
    var form = event.target.closest("form[data-json-form]");
    if (!form) { return; }
    event.preventDefault();
    submit(form);
  });
})();
