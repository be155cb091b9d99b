/* The Try page (AMB-71): a form built from the tool's input schema, raw JSON one click away, and the
 * call's progress and log messages shown as they arrive, with a button that cancels it.
 *
 * The call is a POST to the page's stream URL, answered with one JSON event per line (started,
 * notification..., then result, problem or cancelled); the cancel button POSTs the run id the stream
 * started with. A question the tool asks the person (elicitation, approval) is shown as a form built
 * from its requestedSchema; the answer is POSTed to the answer URL. Without script, the form posts to the page and the whole outcome comes back at once. */
(function () {
  "use strict";
  var SIMPLE = {string: 1, number: 1, integer: 1, boolean: 1};

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      if (attrs[key] !== undefined && attrs[key] !== null) node.setAttribute(key, attrs[key]);
    });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function typeOf(spec) {
    var type = spec.type;
    if (Array.isArray(type)) type = type.filter(function (t) { return t !== "null"; })[0];
    if (!type && Array.isArray(spec.enum)) type = typeof spec.enum[0] === "number" ? "number" : "string";
    if (!type && spec.properties) type = "object";
    return type;
  }

  /* A choice field's options [{value, label}] in any of the spec's shapes (AMB-120): enum (labels from
   * enumNames), oneOf of {const, title}; for a list, its items' enum or anyOf. null: not a choice. */
  function choicesOf(spec) {
    var items = typeOf(spec) === "array" ? spec.items : spec;
    if (!items || typeof items !== "object") return null;
    if (Array.isArray(items.enum)) {
      var names = Array.isArray(spec.enumNames) ? spec.enumNames : items.enum;
      return items.enum.map(function (value, i) { return {value: value, label: String(names[i] !== undefined ? names[i] : value)}; });
    }
    var titled = typeOf(spec) === "array" ? items.anyOf : items.oneOf;
    if (Array.isArray(titled) && titled.length && titled.every(function (o) { return o && "const" in o; })) {
      return titled.map(function (o) { return {value: o["const"], label: String(o.title !== undefined ? o.title : o["const"])}; });
    }
    return null;
  }

  function formable(spec) {
    return spec && typeOf(spec) === "object" && spec.properties && typeof spec.properties === "object";
  }

  function convert(text, type) {
    if (type === "integer" || type === "number") {
      var number = Number(text);
      return text.trim() === "" || isNaN(number) ? text : number;  // the server names a bad number
    }
    if (type === "boolean") return text === "true";
    return text;
  }

  var counter = 0;

  /* One property: returns {node, read() -> [present, value], write(value)}. */
  function field(name, spec, required, path) {
    spec = spec && typeof spec === "object" ? spec : {};
    var type = typeOf(spec);
    var id = "try-field-" + (++counter);
    var wrap = el("div", {"class": "form-row try-field", "data-path": path});
    var label = el("label", {"for": id}, (spec.title || name) + (required ? " *" : ""));
    if (required) label.className = "required";
    var help = spec.description ? el("div", {"class": "help"}, spec.description) : null;
    var input, read, write;

    if (type === "object" && spec.properties) {
      var set = el("fieldset", {"class": "module try-object", "id": id});
      set.appendChild(el("legend", {}, (spec.title || name) + (required ? " *" : "")));
      if (help) set.appendChild(help);
      var children = build(spec, set, path);
      read = function () {
        var value = children.read();
        return [required || Object.keys(value).length > 0, value];
      };
      write = function (value) { children.write(value && typeof value === "object" ? value : {}); };
      return {node: set, read: read, write: write};
    }
    var choices = choicesOf(spec);
    if (choices && SIMPLE[type || "string"]) {
      input = el("select", {"id": id, "name": path});
      if (!required || spec.default === undefined) input.appendChild(el("option", {"value": ""}, "—"));
      choices.forEach(function (option) {
        input.appendChild(el("option", {"value": JSON.stringify(option.value)}, option.label));
      });
      read = function () { return input.value === "" ? [false] : [true, JSON.parse(input.value)]; };
      write = function (value) { input.value = value === undefined ? "" : JSON.stringify(value); };
    } else if (type === "boolean") {
      input = el("select", {"id": id, "name": path});
      [["", "—"], ["true", "true"], ["false", "false"]].forEach(function (pair) {
        input.appendChild(el("option", {"value": pair[0]}, pair[1]));
      });
      read = function () { return input.value === "" ? [false] : [true, input.value === "true"]; };
      write = function (value) { input.value = value === undefined ? "" : String(Boolean(value)); };
    } else if (type === "string" || type === "number" || type === "integer") {
      var attrs = {"id": id, "name": path, "type": type === "string" ? "text" : "number", "class": "vTextField"};
      if (type === "integer") attrs.step = "1";
      if (type === "number") attrs.step = "any";
      if (spec.minimum !== undefined) attrs.min = spec.minimum;
      if (spec.maximum !== undefined) attrs.max = spec.maximum;
      if (spec.format === "date") attrs.type = "date";
      input = el("input", attrs);
      if (spec.examples && spec.examples.length) input.placeholder = "e.g. " + spec.examples[0];
      read = function () { return input.value === "" ? [false] : [true, convert(input.value, type)]; };
      write = function (value) { input.value = value === undefined || value === null ? "" : String(value); };
    } else if (type === "array" && spec.items && SIMPLE[typeOf(spec.items)] && !choices) {
      var itemType = typeOf(spec.items);
      input = el("textarea", {"id": id, "name": path, "rows": 3, "class": "vLargeTextField"});
      input.placeholder = "One " + itemType + " per line";
      read = function () {
        var lines = input.value.split("\n").filter(function (line) { return line.trim() !== ""; });
        if (!lines.length && !required) return [false];
        return [true, lines.map(function (line) { return convert(line.trim(), itemType); })];
      };
      write = function (value) { input.value = Array.isArray(value) ? value.join("\n") : ""; };
    } else if (type === "array" && choices) {
      input = el("select", {"id": id, "name": path, "multiple": "multiple"});
      choices.forEach(function (option) {
        input.appendChild(el("option", {"value": JSON.stringify(option.value)}, option.label));
      });
      read = function () {
        var picked = Array.prototype.filter.call(input.options, function (o) { return o.selected; })
          .map(function (o) { return JSON.parse(o.value); });
        return picked.length || required ? [true, picked] : [false];
      };
      write = function (value) {
        var wanted = (Array.isArray(value) ? value : []).map(function (v) { return JSON.stringify(v); });
        Array.prototype.forEach.call(input.options, function (o) { o.selected = wanted.indexOf(o.value) >= 0; });
      };
    } else {
      // Anything richer (oneOf, arrays of objects, no type): this one value as JSON.
      input = el("textarea", {"id": id, "name": path, "rows": 3, "class": "vLargeTextField try-json"});
      input.placeholder = "JSON";
      read = function () {
        if (input.value.trim() === "") return [false];
        try { return [true, JSON.parse(input.value)]; } catch (err) { return [true, input.value]; }
      };
      write = function (value) { input.value = value === undefined ? "" : JSON.stringify(value); };
    }
    if (required) input.setAttribute("aria-required", "true");
    wrap.appendChild(label);
    wrap.appendChild(input);
    if (help) wrap.appendChild(help);
    return {node: wrap, read: read, write: write};
  }

  /* The properties of an object schema into `container`: returns {read() -> object, write(object)}. */
  function build(schema, container, prefix) {
    var required = Array.isArray(schema.required) ? schema.required : [];
    var fields = {};
    // Required ones first, in the order `required` lists them (a jsonb column keeps no key order).
    var names = Object.keys(schema.properties);
    names = required.filter(function (name) { return names.indexOf(name) >= 0; })
      .concat(names.filter(function (name) { return required.indexOf(name) < 0; }));
    names.forEach(function (name) {
      var one = field(name, schema.properties[name], required.indexOf(name) >= 0, prefix ? prefix + "." + name : name);
      fields[name] = one;
      container.appendChild(one.node);
    });
    return {
      read: function () {
        var value = {};
        Object.keys(fields).forEach(function (name) {
          var got = fields[name].read();
          if (got[0]) value[name] = got[1];
        });
        return value;
      },
      write: function (value) {
        Object.keys(fields).forEach(function (name) { fields[name].write(value[name]); });
      }
    };
  }

  function start() {
    var form = document.getElementById("try-form");
    if (!form || !window.fetch || !window.TextDecoder) return;
    var schema = JSON.parse(document.getElementById("try-schema").textContent || "{}");
    var fieldsBox = document.getElementById("try-fields");
    var raw = document.getElementById("try-raw");
    var textarea = document.getElementById("id_arguments");
    var toggle = document.getElementById("try-toggle");
    var cancelButton = document.getElementById("try-cancel");
    var runButton = document.getElementById("try-run");
    var live = document.getElementById("try-live");
    var status = document.getElementById("try-status");
    var log = document.getElementById("try-log");
    var result = document.getElementById("try-result");
    var progressRow = document.getElementById("try-progress-row");
    var progress = document.getElementById("try-progress");
    var progressText = document.getElementById("try-progress-text");
    var questions = document.getElementById("try-questions");
    var mode = "raw";
    var generated = null;
    var runId = null;

    if (formable(schema)) {
      if (!Object.keys(schema.properties).length) {
        fieldsBox.appendChild(el("p", {"class": "help"}, "This tool takes no arguments."));
      }
      generated = build(schema, fieldsBox, "");
      var initial = {};
      try { initial = JSON.parse(textarea.value || "{}"); } catch (err) { initial = null; }
      if (initial && typeof initial === "object") {
        generated.write(initial);
        mode = "form";
        fieldsBox.hidden = false;
        raw.hidden = true;
      }
      toggle.hidden = false;
      toggle.textContent = mode === "form" ? "Edit as raw JSON" : "Edit as a form";
    }

    toggle.addEventListener("click", function () {
      if (mode === "form") {
        textarea.value = JSON.stringify(generated.read(), null, 2);
        mode = "raw";
      } else {
        var value;
        try { value = JSON.parse(textarea.value || "{}"); } catch (err) {
          status.textContent = "The raw JSON does not parse (" + err.message + "): fix it to go back to the form.";
          live.hidden = false;
          return;
        }
        generated.write(value && typeof value === "object" ? value : {});
        mode = "form";
      }
      fieldsBox.hidden = mode !== "form";
      raw.hidden = mode === "form";
      toggle.textContent = mode === "form" ? "Edit as raw JSON" : "Edit as a form";
    });

    function note(text, kind) {
      var item = el("li", {"class": kind}, text);
      log.appendChild(item);
    }

    function show(event) {
      if (event.event === "started") {
        runId = event.run;
        status.textContent = "Running… (protocol " + event.version + ")";
      } else if (event.event === "notification") {
        var message = event.message || {};
        var params = message.params || {};
        var at = (event.ms / 1000).toFixed(1) + " s";
        if (message.method === "notifications/progress") {
          progressRow.hidden = false;
          if (params.total) { progress.max = params.total; progress.value = params.progress; }
          else { progress.removeAttribute("value"); }
          progressText.textContent = params.progress + (params.total ? " of " + params.total : "") +
            (params.message ? ": " + params.message : "");
          note(at + " progress " + progressText.textContent, "progress");
        } else if (message.method === "notifications/message") {
          var data = typeof params.data === "string" ? params.data : JSON.stringify(params.data);
          note(at + " [" + params.level + "]" + (params.logger ? " " + params.logger : "") + ": " + data, "log " + params.level);
        } else {
          note(at + " " + JSON.stringify(message), "other");
        }
      } else if (event.event === "question") {
        ask(event);
      } else if (event.event === "result") {
        status.textContent = (event.protocol_error ? "Protocol error" : event.is_error ? "Result: error" : "Result") +
          " (" + event.elapsed_ms + " ms)";
        status.className = event.is_error || event.protocol_error ? "errors" : "ok";
        result.textContent = event.body;
      } else if (event.event === "cancelled") {
        status.textContent = "Cancelled after " + event.elapsed_ms + " ms: the call was stopped as a client's notifications/cancelled stops it.";
        status.className = "cancelled";
      } else if (event.event === "problem") {
        status.textContent = event.message;
        status.className = "errors";
      }
    }

    function post(url, fields) {
      var body = new FormData();
      body.append("csrfmiddlewaretoken", form.querySelector("input[name=csrfmiddlewaretoken]").value);
      Object.keys(fields).forEach(function (key) { body.append(key, fields[key]); });
      return fetch(url, {method: "POST", body: body, credentials: "same-origin"});
    }

    /* A question of the call: its message, a form from its requestedSchema, and the three answers. */
    function ask(event) {
      var params = event.params || {};
      var box = el("fieldset", {"class": "module try-question", "data-question": event.id});
      box.appendChild(el("legend", {}, "The tool asks"));
      box.appendChild(el("p", {"class": "try-question-message"}, params.message || event.method));
      var schema = params.requestedSchema;
      var answerForm = formable(schema) ? build(schema, box, "answer") : null;
      if (answerForm) {
        // The form starts at the defaults its fields name (2025-11-25 allows one on every field).
        var defaults = {};
        Object.keys(schema.properties).forEach(function (name) {
          var spec = schema.properties[name];
          if (spec && typeof spec === "object" && spec.default !== undefined) defaults[name] = spec.default;
        });
        answerForm.write(defaults);
      }
      var row = el("div", {"class": "submit-row try-actions"});
      var run = runId;
      [["accept", "Accept", "button default"], ["decline", "Decline", "button"], ["cancel", "Cancel", "button"]]
        .forEach(function (choice) {
          var button = el("button", {"type": "button", "class": choice[2]}, choice[1]);
          button.addEventListener("click", function () {
            var content = answerForm && choice[0] === "accept" ? answerForm.read() : {};
            box.disabled = true;
            post(form.dataset.answerUrl, {
              run: run, question: event.id, action: choice[0], content: JSON.stringify(content)
            }).then(function (response) {
              box.appendChild(el("p", {"class": response.ok ? "help" : "errornote"},
                response.ok ? "Answered: " + choice[0] + "." : "The answer was refused (" + response.status + ")."));
            });
          });
          row.appendChild(button);
        });
      box.appendChild(row);
      questions.appendChild(box);
      note((event.ms / 1000).toFixed(1) + " s asked: " + (params.message || event.method), "question");
    }

    function finish() {
      // A question left unanswered when the call ended can no longer be answered.
      questions.querySelectorAll("fieldset").forEach(function (box) { box.disabled = true; });
      runButton.disabled = false;
      cancelButton.hidden = true;
      runId = null;
    }

    form.addEventListener("submit", function (submitted) {
      submitted.preventDefault();
      var text = mode === "form" ? JSON.stringify(generated.read()) : textarea.value;
      var body = new FormData();
      body.append("csrfmiddlewaretoken", form.querySelector("input[name=csrfmiddlewaretoken]").value);
      body.append("arguments", text);
      live.hidden = false;
      status.textContent = "Starting…";
      status.className = "";
      log.textContent = "";
      questions.textContent = "";
      result.textContent = "";
      progressRow.hidden = true;
      runButton.disabled = true;
      cancelButton.hidden = false;
      cancelButton.disabled = false;
      fetch(form.dataset.streamUrl, {method: "POST", body: body, credentials: "same-origin"})
        .then(function (response) {
          if (!response.ok) throw new Error("the server answered " + response.status);
          var reader = response.body.getReader();
          var decoder = new TextDecoder();
          var buffered = "";
          function pump() {
            return reader.read().then(function (chunk) {
              if (chunk.done) return;
              buffered += decoder.decode(chunk.value, {stream: true});
              var lines = buffered.split("\n");
              buffered = lines.pop();
              lines.forEach(function (line) { if (line.trim()) show(JSON.parse(line)); });
              return pump();
            });
          }
          return pump();
        })
        .catch(function (err) {
          status.textContent = "The call could not be followed: " + err.message;
          status.className = "errors";
        })
        .then(finish);
    });

    cancelButton.addEventListener("click", function () {
      if (!runId) return;
      cancelButton.disabled = true;
      status.textContent = "Cancelling…";
      post(form.dataset.cancelUrl, {run: runId});
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
