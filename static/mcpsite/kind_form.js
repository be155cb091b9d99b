/* The tool form per handler kind (AMB-260): only the chosen kind's rows, its settings' help, and on a
 * new tool its working example.
 *
 * The kind's select (#id_handler) carries, from mcp_app/admin/kind_form.py: data-kind-rows (form row →
 * the kinds it applies to), data-kind-help (the settings' one line per kind) and, on a new tool only,
 * data-kind-examples (per kind: handler_config, input_schema, a note). A row that does not apply is
 * hidden, unless it shows an error; a fieldset left with no visible row is hidden with it. Choosing
 * another kind on a new tool replaces the settings and the input schema only while they still hold an
 * example (or nothing): what the person typed is never overwritten. Without JavaScript every row shows
 * and the form works as before. */
(function () {
  "use strict";

  function canonical(value) {
    if (Array.isArray(value)) return "[" + value.map(canonical).join(",") + "]";
    if (value !== null && typeof value === "object") {
      return "{" + Object.keys(value).sort().map(function (k) {
        return JSON.stringify(k) + ":" + canonical(value[k]);
      }).join(",") + "}";
    }
    return JSON.stringify(value);
  }

  function parse(text, fallback) {
    try { return JSON.parse(text || "null") || fallback; } catch (err) { return fallback; }
  }

  function rowOf(name) { return document.querySelector(".form-row.field-" + name); }

  function editorOf(name) { return document.querySelector("[data-json-editor][data-field=" + name + "]"); }

  function setUp() {
    var select = document.getElementById("id_handler");
    if (!select || !select.dataset.kindRows) return;
    var rows = parse(select.dataset.kindRows, {});
    var help = parse(select.dataset.kindHelp, {});
    var examples = select.dataset.kindExamples ? parse(select.dataset.kindExamples, {}) : null;
    var note = null;
    if (examples) {
      note = document.createElement("p");
      note.className = "kind-example-note";
      note.setAttribute("role", "status");
      var row = select.closest(".form-row");
      (row || select.parentNode).appendChild(note);  // under the kind's help, not beside the select
    }

    function show(kind) {
      Object.keys(rows).forEach(function (name) {
        var row = rowOf(name);
        if (!row) return;
        var applies = rows[name].indexOf(kind) >= 0;
        var failing = row.classList.contains("errors") || row.querySelector(".errorlist");
        row.hidden = !applies && !failing;
      });
      document.querySelectorAll("[data-kinds]").forEach(function (node) {
        node.hidden = parse(node.dataset.kinds, []).indexOf(kind) < 0;
      });
      document.querySelectorAll("fieldset.module").forEach(function (fieldset) {
        var all = fieldset.querySelectorAll(".form-row");
        if (!all.length) return;
        var visible = Array.prototype.some.call(all, function (row) { return !row.hidden; });
        fieldset.hidden = !visible;
      });
      var configRow = rowOf("handler_config");
      var configHelp = configRow && configRow.querySelector(".help");
      if (configHelp && help[kind]) configHelp.textContent = "Settings of the kind: " + help[kind];
    }

    // Whether a field still holds no work of the person's: never edited on this page (json_editor.js
    // marks an edit), and empty or one of the examples (a form sent back with errors holds their work).
    function untouched(name, root, value) {
      if (root.dataset.touched) return false;
      if (value === null || canonical(value) === "{}") return true;
      if (name === "input_schema" && canonical(value) === canonical({type: "object", properties: {}})) return true;
      return Object.keys(examples).some(function (kind) {
        return canonical(examples[kind][name]) === canonical(value);
      });
    }

    function offerExample(kind) {
      var example = examples[kind];
      if (note) note.textContent = example && example.note ? "Example: " + example.note : "";
      if (!example) return;
      // A python tool's settings are its callable's select (the settings box is hidden, the server
      // takes the select): the example goes there only, so an emptied select is seen as such.
      (kind === "python" ? ["input_schema"] : ["handler_config", "input_schema"]).forEach(function (name) {
        var root = editorOf(name);
        if (!root || !root.setJSON) return;
        var current;
        try { current = root.getJSON(); } catch (err) { return; }  // text being typed: the person's
        if (untouched(name, root, current)) root.setJSON(example[name], true);
      });
      var callable = document.getElementById("id_python_callable");
      if (kind === "python" && callable && !callable.value) callable.value = example.handler_config.callable;
    }

    select.addEventListener("change", function () {
      show(select.value);
      if (examples) offerExample(select.value);
    });
    show(select.value);
    if (note && examples[select.value]) note.textContent = "Example: " + examples[select.value].note;
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUp);
  else setUp();
})();
