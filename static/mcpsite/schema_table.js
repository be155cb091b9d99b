/* Tables and editors over the admin's JSON fields (AMB-261): a small form in place of raw JSON.
 *
 * A JSON editor root (lib/formfields.py's [data-json-editor]) whose data-structured names one of:
 *   "schema"           an object JSON Schema as a table of arguments (name, type, description,
 *                      required, default, choices): a tool's input and output schema;
 *   "form_fields"      the "fields" of a form tool's settings (name, title, type, required, default,
 *                      choices, min, max), the rest of the settings left as typed;
 *   "prompt_arguments" a prompt's arguments (name, title, description, required);
 *   "messages"         a prompt's messages: a role and one content block each (text, image, resource).
 * The table writes the JSON on every edit (root.setJSON, so the server's check runs as when typed);
 * the JSON view is one click away, and a JSON value the table cannot show keeps the JSON view open
 * with a note saying why. Without JavaScript the JSON textarea is the whole field. */
(function () {
  "use strict";

  var TYPES = ["string", "number", "integer", "boolean", "array", "object"];
  var FORM_TYPES = ["string", "number", "integer", "boolean"];

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      if (key === "text") node.textContent = attrs[key];
      else if (key === "checked") node.checked = attrs[key];
      else node.setAttribute(key, attrs[key]);
    });
    (children || []).forEach(function (child) { node.appendChild(child); });
    return node;
  }

  function isObject(value) { return value !== null && typeof value === "object" && !Array.isArray(value); }
  function onlyKeys(value, allowed) {
    return Object.keys(value).every(function (key) { return allowed.indexOf(key) >= 0; });
  }

  // --- Object schemas <-> rows ---------------------------------------------------------------------

  var SCHEMA_KEYS = ["type", "properties", "required", "additionalProperties", "$schema"];
  var PROP_KEYS = {
    schema: ["type", "description", "default", "enum"],
    form_fields: ["type", "title", "description", "default", "enum", "minimum", "maximum", "minLength", "maxLength"]
  };

  function defaultText(type, value) {
    if (value === undefined) return "";
    return type === "string" ? String(value) : JSON.stringify(value);
  }

  // The rows of an object schema, or a sentence saying why the table cannot show it.
  function schemaRows(schema, mode) {
    if (schema === null) return {rows: []};
    if (!isObject(schema) || schema.type !== "object") return {why: "its root is not an object schema"};
    if (!onlyKeys(schema, SCHEMA_KEYS)) return {why: "it uses keywords the table has no column for"};
    var props = schema.properties || {};
    var required = schema.required || [];
    if (!isObject(props) || !Array.isArray(required)) return {why: "its properties are not a plain list"};
    var types = mode === "form_fields" ? FORM_TYPES : TYPES;
    var rows = [];
    var why = null;
    Object.keys(props).forEach(function (name) {
      var prop = props[name];
      if (why) return;
      if (!isObject(prop) || !onlyKeys(prop, PROP_KEYS[mode]) || types.indexOf(prop.type) < 0) {
        why = "the argument '" + name + "' uses more than a type, a description, a default and choices";
        return;
      }
      if (prop.enum !== undefined && (prop.type !== "string" || !Array.isArray(prop.enum) ||
          !prop.enum.every(function (v) { return typeof v === "string" && v.indexOf(",") < 0; }))) {
        why = "the choices of '" + name + "' are not plain words";
        return;
      }
      var min = prop.type === "string" ? prop.minLength : prop.minimum;
      var max = prop.type === "string" ? prop.maxLength : prop.maximum;
      if ((prop.type === "string" && (prop.minimum !== undefined || prop.maximum !== undefined)) ||
          (prop.type !== "string" && (prop.minLength !== undefined || prop.maxLength !== undefined))) {
        why = "the limits of '" + name + "' do not fit its type";
        return;
      }
      rows.push({
        name: name, type: prop.type, title: prop.title || "", description: prop.description || "",
        required: required.indexOf(name) >= 0, default: defaultText(prop.type, prop["default"]),
        choices: (prop.enum || []).join(", "),
        min: min === undefined ? "" : String(min), max: max === undefined ? "" : String(max)
      });
    });
    return why ? {why: why} : {rows: rows};
  }

  // The default typed in a row, as the JSON value of its type; undefined when blank, Error when wrong.
  function parseDefault(type, text) {
    if (!text.trim()) return undefined;
    if (type === "string") return text;
    try {
      var value = JSON.parse(text);
    } catch (err) { return new Error("not JSON"); }
    var ok = {number: typeof value === "number", integer: Number.isInteger(value),
      boolean: typeof value === "boolean", array: Array.isArray(value), object: isObject(value)}[type];
    return ok ? value : new Error("not a " + type);
  }

  function rowsSchema(rows, base, mode) {
    var schema = {};
    Object.keys(base || {}).forEach(function (key) {
      if (key !== "properties" && key !== "required") schema[key] = base[key];
    });
    schema.type = "object";
    schema.properties = {};
    var required = [];
    rows.forEach(function (row) {
      if (!row.name) return;
      var prop = {type: row.type};
      if (row.title) prop.title = row.title;
      if (row.description) prop.description = row.description;
      var choices = row.choices.split(",").map(function (c) { return c.trim(); }).filter(Boolean);
      if (row.type === "string" && choices.length) prop.enum = choices;
      if (mode === "form_fields" && row.type !== "boolean") {
        var keys = row.type === "string" ? ["minLength", "maxLength"] : ["minimum", "maximum"];
        [[row.min, keys[0]], [row.max, keys[1]]].forEach(function (pair) {
          if (pair[0] !== "" && !isNaN(Number(pair[0]))) prop[pair[1]] = Number(pair[0]);
        });
      }
      var value = parseDefault(row.type, row["default"]);
      if (value !== undefined && !(value instanceof Error)) prop["default"] = value;
      schema.properties[row.name] = prop;
      if (row.required) required.push(row.name);
    });
    if (required.length) schema.required = required;
    return schema;
  }

  var COLUMNS = {
    schema: ["name", "type", "description", "required", "default", "choices"],
    form_fields: ["name", "title", "type", "required", "default", "choices", "min", "max"],
    prompt_arguments: ["name", "title", "description", "required"]
  };
  var HEADINGS = {name: "Name", type: "Type", title: "Title", description: "Description", required: "Required",
    "default": "Default", choices: "Choices (comma-separated)", min: "Min", max: "Max"};

  // --- The table ------------------------------------------------------------------------------------

  function Table(root, mode) {
    var self = this;
    var field = root.dataset.field;
    var embedded = mode === "form_fields";
    var writing = false;
    var base = null;
    var wrap = el("div", {"class": "structured-table", "data-table-for": field});
    var note = el("p", {"class": "structured-note", role: "note"});
    var table = el("table", {"class": "structured-rows"});
    var add = el("button", {type: "button", "class": "button structured-add",
      text: mode === "form_fields" ? "Add a field" : (field === "output_schema" ? "Add a property" : "Add an argument")});
    var toggle = el("button", {type: "button", "class": "button structured-toggle", "aria-pressed": "false",
      text: "Edit as JSON"});
    var columns = COLUMNS[mode];
    table.appendChild(el("thead", {}, [el("tr", {}, columns.map(function (c) {
      return el("th", {scope: "col", text: HEADINGS[c]});
    }).concat([el("th", {text: ""})]))]));
    var body = el("tbody");
    table.appendChild(body);
    wrap.appendChild(table);
    wrap.appendChild(add);
    if (!embedded) wrap.appendChild(toggle);
    wrap.appendChild(note);
    root.insertBefore(wrap, root.firstChild);  // inside the field, above its JSON view
    if (embedded) wrap.dataset.kinds = JSON.stringify(["form"]);

    function value() {
      try { return {value: root.getJSON()}; } catch (err) { return {why: "the JSON is not valid"}; }
    }

    function part(whole) {
      if (mode !== "form_fields") return whole;
      return isObject(whole) && whole.fields !== undefined ? whole.fields : null;
    }

    function rowsOf(json) {
      if (mode !== "prompt_arguments") return schemaRows(json, mode);
      if (json === null) return {rows: []};
      if (!Array.isArray(json)) return {why: "it is not a list"};
      var rows = [];
      for (var i = 0; i < json.length; i++) {
        var arg = json[i];
        if (!isObject(arg) || !onlyKeys(arg, ["name", "title", "description", "required"])) {
          return {why: "an argument has completions or asks: more than the table shows"};
        }
        rows.push({name: arg.name || "", title: arg.title || "", description: arg.description || "",
          required: !!arg.required});
      }
      return {rows: rows};
    }

    function build(rows) {
      if (mode === "prompt_arguments") {
        return rows.filter(function (r) { return r.name; }).map(function (r) {
          var arg = {name: r.name};
          if (r.title) arg.title = r.title;
          if (r.description) arg.description = r.description;
          if (r.required) arg.required = true;
          return arg;
        });
      }
      return rowsSchema(rows, base, mode);
    }

    function readRows() {
      return Array.prototype.map.call(body.rows, function (tr) {
        var row = {};
        columns.forEach(function (c) {
          var input = tr.querySelector("[data-col=" + c + "]");
          row[c] = c === "required" ? input.checked : input.value;
        });
        return row;
      });
    }

    function write() {
      var rows = readRows();
      var built = build(rows);
      Array.prototype.forEach.call(body.rows, function (tr, i) {
        var input = tr.querySelector("[data-col=default]");
        if (!input) return;
        var bad = parseDefault(rows[i].type, rows[i]["default"]) instanceof Error;
        input.classList.toggle("invalid", bad);
        input.title = bad ? "Not a " + rows[i].type + ": left out" : "";
      });
      var whole = built;
      if (mode === "form_fields") {
        var current = value().value;
        whole = isObject(current) ? current : {};
        whole.fields = built;
      } else if (mode === "schema" && field === "output_schema" && !rows.length) {
        whole = null;  // no arguments, no output schema (blank is the model's default)
      }
      writing = true;
      root.setJSON(whole);
      writing = false;
    }

    // No rows, no headings: an empty output schema reads as "none".
    function headings() { table.tHead.hidden = !body.rows.length; }

    function addRow(row) {
      var tr = el("tr");
      columns.forEach(function (c) {
        var input;
        var label = HEADINGS[c] + " of the row";
        if (c === "type") {
          input = el("select", {"aria-label": label});
          (mode === "form_fields" ? FORM_TYPES : TYPES).forEach(function (t) {
            var option = el("option", {value: t, text: t});
            if (row.type === t) option.selected = true;
            input.appendChild(option);
          });
        } else if (c === "required") {
          input = el("input", {type: "checkbox", "aria-label": label, checked: !!row.required});
        } else {
          input = el("input", {type: "text", "aria-label": label, value: row[c] || "",
            size: c === "description" ? 30 : (c === "min" || c === "max" ? 4 : 12)});
        }
        input.dataset.col = c;
        input.addEventListener(c === "type" || c === "required" ? "change" : "input", write);
        tr.appendChild(el("td", {}, [input]));
      });
      var remove = el("button", {type: "button", "class": "button structured-remove", text: "Remove",
        "aria-label": "Remove this row"});
      remove.addEventListener("click", function () { tr.remove(); headings(); write(); });
      tr.appendChild(el("td", {}, [remove]));
      body.appendChild(tr);
      headings();
      return tr;
    }

    function showJSON(on, why) {
      root.classList.toggle("table-mode", !on && !embedded);
      table.hidden = embedded ? !!why : on;
      add.hidden = table.hidden;
      toggle.textContent = on ? "Edit as a table" : "Edit as JSON";
      toggle.setAttribute("aria-pressed", on ? "true" : "false");
      note.textContent = why ? "The table cannot show this value (" + why + "): edit it as JSON." : "";
    }

    // Show the current JSON in the table; false (and the JSON view, with the reason) when it cannot.
    self.refresh = function () {
      var current = value();
      var json = current.why ? null : part(current.value);
      var shown = current.why ? {why: current.why} : rowsOf(json);
      if (mode === "form_fields" && isObject(current.value) && current.value.questions !== undefined) {
        shown = {why: "this form asks several questions"};
      }
      if (shown.why) { showJSON(true, shown.why); return false; }
      base = json;
      body.textContent = "";
      shown.rows.forEach(addRow);
      headings();
      if (!embedded && root.classList.contains("table-mode") === false && toggle.dataset.chosen === "json") {
        return true;  // the person asked for the JSON view: keep it
      }
      showJSON(false, null);
      return true;
    };

    add.addEventListener("click", function () {
      var tr = addRow({type: "string"});
      tr.querySelector("input").focus();
    });
    toggle.addEventListener("click", function () {
      if (root.classList.contains("table-mode")) {
        toggle.dataset.chosen = "json";
        showJSON(true, null);
      } else {
        toggle.dataset.chosen = "";
        self.refresh();
      }
    });
    function heard() { if (!writing && (embedded || !root.classList.contains("table-mode"))) self.refresh(); }
    root.addEventListener("json-editor:set", function () { if (!writing) self.refresh(); });
    root.addEventListener("json-editor:change", heard);
    self.refresh();
  }

  window.McpStructured = window.McpStructured || {};
  window.McpStructured.Table = Table;
  window.McpStructured.el = el;
  window.McpStructured.isObject = isObject;
  window.McpStructured.onlyKeys = onlyKeys;

  function setUpAll() {
    document.querySelectorAll("[data-json-editor][data-structured]").forEach(function (root) {
      var mode = root.dataset.structured;
      if (!root.getJSON || root.dataset.structuredReady) return;
      root.dataset.structuredReady = "1";
      if (COLUMNS[mode]) new Table(root, mode);
      else if (mode === "messages" && window.McpStructured.Messages) new window.McpStructured.Messages(root);
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUpAll);
  else setUpAll();
})();
