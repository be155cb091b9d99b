/* The admin's JSON fields as structured editors (AMB-70).
 *
 * Each [data-json-editor] holds the real <textarea> (what the form submits) and an empty box. The
 * script puts a JSONEditor (tree, code and text modes; served from our static files) in the box, hides
 * the textarea and copies the editor's exact text back into it on every change, so the server still
 * judges what was typed. As you type: the JSON syntax here, then, after a pause, the server's own check
 * of this field (its data-check-url), shown under the editor. Other scripts (schema_table.js,
 * kind_form.js) read and write the value through root.getJSON / root.setJSON and hear each edit typed
 * here as a "json-editor:change" event on the root (AMB-261). */
(function () {
  "use strict";
  var PAUSE_MS = 400;

  function csrfToken() {
    var input = document.querySelector("input[name=csrfmiddlewaretoken]");
    if (input) return input.value;
    var match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  function valueOf(id) {
    var el = document.getElementById(id);
    return el ? el.value : "";
  }

  function show(status, kind, lines) {
    status.className = "json-editor-status " + kind;
    status.textContent = "";
    lines.forEach(function (line) {
      var div = document.createElement("div");
      div.textContent = line;
      status.appendChild(div);
    });
  }

  // Inputs the editor makes have no label: a boolean's checkbox in tree mode, the code and text modes'
  // hidden textareas. Name them for screen readers (axe: label), the field's own label first.
  function labelInputs(root, box) {
    var fieldLabel = root.closest(".form-row, div.fieldBox, .flex-container");
    fieldLabel = fieldLabel && fieldLabel.querySelector("label");
    var name = fieldLabel ? fieldLabel.textContent.replace(/:\s*$/, "") : root.dataset.field;
    box.querySelectorAll("textarea:not([aria-label])").forEach(function (input) {
      input.setAttribute("aria-label", name + " (JSON)");
    });
    box.querySelectorAll("input[type=checkbox]:not([aria-label])").forEach(function (input) {
      var row = input.closest("tr");
      var field = row && row.querySelector(".jsoneditor-field");
      input.setAttribute("aria-label", (field && field.textContent ? field.textContent + ": " : "") + "true or false");
    });
  }

  function setUp(root) {
    if (root.dataset.ready) return;
    root.dataset.ready = "1";
    var textarea = root.querySelector(":scope > textarea");
    var box = root.querySelector(".json-editor-box");
    var status = root.querySelector(".json-editor-status");
    var checkUrl = root.dataset.checkUrl;
    var timer = null;
    var asked = 0;

    function serverCheck(text) {
      if (!checkUrl) return;
      var ticket = ++asked;
      var body = new FormData();
      body.append("field", root.dataset.field);
      body.append("value", text);
      body.append("handler", valueOf("id_handler"));
      body.append("uri_template", valueOf("id_uri_template"));
      fetch(checkUrl, {
        method: "POST", body: body, credentials: "same-origin",
        headers: {"X-CSRFToken": csrfToken(), "Accept": "application/json"}
      }).then(function (response) {
        return response.ok ? response.json() : null;
      }).then(function (answer) {
        if (!answer || ticket !== asked) return;  // an older answer than the text shown
        if (answer.errors.length) show(status, "errors", answer.errors);
        else show(status, "ok", [answer.ok || "Valid."]);
      }).catch(function () { /* offline: the save still checks everything */ });
    }

    function check(text) {
      clearTimeout(timer);
      if (!text.trim()) {
        show(status, "", ["Empty: the default value is saved."]);
        return;
      }
      try {
        JSON.parse(text);
      } catch (err) {
        show(status, "errors", ["Invalid JSON: " + err.message]);
        return;
      }
      show(status, "pending", ["Valid JSON" + (checkUrl ? "; checking…" : ".")]);
      timer = setTimeout(function () { serverCheck(text); }, PAUSE_MS);
    }

    // The kind of handler decides what its settings must hold: check them again when it changes.
    var handler = document.getElementById("id_handler");
    if (handler && root.dataset.field === "handler_config") {
      handler.addEventListener("change", function () { if (root.dataset.touched) check(textarea.value); });
    }

    var text = textarea.value;
    var parsed;
    var valid = true;
    try { parsed = JSON.parse(text); } catch (err) { valid = false; }
    var structured = valid && parsed !== null && typeof parsed === "object";
    var editor = new JSONEditor(box, {
      mode: structured ? "tree" : "code",
      modes: ["tree", "code", "text"],
      search: false,
      mainMenuBar: true,
      navigationBar: false,
      onChangeText: function (changed) {
        root.dataset.touched = "1";
        textarea.value = changed;
        check(changed);
        root.dispatchEvent(new CustomEvent("json-editor:change", {detail: {text: changed}}));
      },
      onModeChange: function () { check(textarea.value); }
    });
    if (structured) editor.set(parsed);
    else editor.setText(text);
    if (structured) editor.expandAll();
    labelInputs(root, box);
    new MutationObserver(function () { labelInputs(root, box); }).observe(box, {childList: true, subtree: true});
    textarea.hidden = true;
    box.hidden = false;
    root.jsonEditor = editor;
    // A value set by another script (a table, an example) is the person's to check, as if typed.
    root.setJSON = function (value, quiet) {
      var pretty = value === null || value === undefined ? "" : JSON.stringify(value, null, 2);
      textarea.value = pretty;
      if (value !== null && typeof value === "object") { editor.set(value); editor.expandAll(); }
      else editor.setText(pretty);
      if (!quiet) { root.dataset.touched = "1"; check(pretty); }
      root.dispatchEvent(new CustomEvent("json-editor:set"));
    };
    // Nothing is judged before the person edits: a new tool's empty settings are not an error yet.
  }

  // Without the editor (no script of its), the plain textarea is the value.
  function plainAccess(root) {
    var textarea = root.querySelector(":scope > textarea");
    root.setJSON = function (value) {
      textarea.value = value === null || value === undefined ? "" : JSON.stringify(value, null, 2);
      root.dispatchEvent(new CustomEvent("json-editor:set"));
    };
    textarea.addEventListener("input", function () {
      root.dataset.touched = "1";
      root.dispatchEvent(new CustomEvent("json-editor:change", {detail: {text: textarea.value}}));
    });
  }

  function setUpAll() {
    // Ace's JSON syntax worker from our own origin, not the build's data: URL that the CSP blocks
    // (lib/ace_worker.py, AMB-233).
    var first = document.querySelector("[data-json-editor][data-worker-url]");
    if (first && window.ace && window.ace.config) {
      window.ace.config.setModuleUrl("ace/mode/json_worker", first.dataset.workerUrl);
    }
    document.querySelectorAll("[data-json-editor]").forEach(function (root) {
      root.getJSON = function () {
        var text = root.querySelector(":scope > textarea").value;
        if (!text.trim()) return null;
        return JSON.parse(text);  // throws on text that is not JSON: the caller says so
      };
      if (typeof JSONEditor === "undefined") plainAccess(root);  // the plain textareas stay
      else setUp(root);
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUpAll);
  else setUpAll();
})();
