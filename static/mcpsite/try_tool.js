/* The Try page (AMB-71): a form built from the tool's input schema, raw JSON one click away, and the
 * call's progress and log messages shown as they arrive, with a button that cancels it.
 *
 * The call is a POST to the page's stream URL, answered with one JSON event per line (started,
 * notification..., then result, problem or cancelled); the cancel button POSTs the run id the stream
 * started with. The page plays the client (AMB-250): the stream's POST names the era and capabilities
 * chosen, and each question the tool asks is answered here: a form built from an elicitation's
 * requestedSchema (or a link, in URL mode), the model's reply typed for a sampling request (shown with
 * its messages, system prompt, preferences and token limit), the roots entered as URIs with names; the
 * answer is POSTed to the answer URL. The result is drawn as a client shows it (the blocks of
 * try_render.view, AMB-251), the raw JSON one click away. Without script, the form posts to the page
 * and the whole outcome comes back at once. */
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

  /* A result as a client shows it: the blocks of try_render.view (media already checked to be data:
   * URLs of their type), then structured content as a table. */
  function drawView(view, box) {
    box.textContent = "";
    (view.blocks || []).forEach(function (block) {
      var node;
      if (block.kind === "text") node = el("div", {"class": "try-block try-text"}, block.text);
      else if (block.kind === "image") node = el("img", {"class": "try-block try-image", "src": block.src, "alt": "An image the tool returned (" + block.mime + ")"});
      else if (block.kind === "audio") node = el("audio", {"class": "try-block try-audio", "controls": "controls", "src": block.src});
      else if (block.kind === "resource_link") {
        node = el("div", {"class": "try-block try-resource-link"}, "Link to a resource: ");
        node.appendChild(el("strong", {}, block.name));
        node.appendChild(document.createTextNode(" "));
        node.appendChild(el("code", {}, block.uri));
        if (block.mime) node.appendChild(document.createTextNode(" (" + block.mime + ")"));
      } else if (block.kind === "resource") {
        node = el("figure", {"class": "try-block try-resource"});
        var caption = el("figcaption", {}, "Embedded resource ");
        caption.appendChild(el("code", {}, block.uri));
        if (block.mime) caption.appendChild(document.createTextNode(" (" + block.mime + ")"));
        node.appendChild(caption);
        node.appendChild(block.binary ? el("p", {}, "Binary content.") : el("pre", {}, block.text));
      } else if (block.kind === "note") node = el("p", {"class": "try-block try-note"}, block.text);
      else if (block.kind === "error") node = el("p", {"class": "try-block try-error errornote"}, block.text);
      else node = el("pre", {"class": "try-block try-json"}, block.text);
      box.appendChild(node);
    });
    if (view.explain) box.appendChild(el("p", {"class": "try-block try-explain"}, view.explain));
    if (view.table) {
      var table = el("table", {"class": "try-block try-table"});
      table.appendChild(el("caption", {}, "Structured content"));
      var head = el("tr");
      view.table.columns.forEach(function (column) { head.appendChild(el("th", {"scope": "col"}, column)); });
      table.appendChild(el("thead")).appendChild(head);
      var body = table.appendChild(el("tbody"));
      view.table.rows.forEach(function (row) {
        var line = body.appendChild(el("tr"));
        row.forEach(function (cell) { line.appendChild(el("td", {}, cell)); });
      });
      box.appendChild(table);
    }
  }

  /* What a sampling request asks the model: system prompt, messages, preferences, token limit. */
  function samplingRequest(params, box) {
    var list = el("dl", {"class": "try-sampling"});
    function item(term, value) {
      if (value === undefined || value === null || value === "") return;
      list.appendChild(el("dt", {}, term));
      list.appendChild(typeof value === "string" ? el("dd", {}, value) : value);
    }
    item("System prompt", params.systemPrompt);
    var messages = el("dd");
    (params.messages || []).forEach(function (message) {
      var content = Array.isArray(message.content) ? message.content : [message.content || {}];
      content.forEach(function (part) {
        var line = el("div", {"class": "try-message"});
        line.appendChild(el("strong", {}, (message.role || "user") + ": "));
        line.appendChild(document.createTextNode(part.type === "text" ? part.text : "[" + part.type + "]"));
        messages.appendChild(line);
      });
    });
    item("Messages", messages);
    var prefs = params.modelPreferences;
    if (prefs) {
      var said = [];
      if (Array.isArray(prefs.hints) && prefs.hints.length) {
        said.push("models like " + prefs.hints.map(function (h) { return h.name; }).join(", "));
      }
      ["cost", "speed", "intelligence"].forEach(function (what) {
        if (prefs[what + "Priority"] !== undefined) said.push(what + " priority " + prefs[what + "Priority"]);
      });
      item("Model preferences", said.join("; "));
    }
    item("Max tokens", params.maxTokens !== undefined ? String(params.maxTokens) : "");
    item("Temperature", params.temperature !== undefined ? String(params.temperature) : "");
    box.appendChild(list);
  }

  /* Rows of roots (URI and name) with a button that adds one; read() -> {roots: [...]}. */
  function rootsEditor(box) {
    var table = el("table", {"class": "try-roots"});
    var head = el("tr");
    head.appendChild(el("th", {"scope": "col"}, "URI"));
    head.appendChild(el("th", {"scope": "col"}, "Name"));
    table.appendChild(el("thead")).appendChild(head);
    var body = table.appendChild(el("tbody"));
    var rows = [];
    function add() {
      var n = rows.length + 1;
      var line = body.appendChild(el("tr"));
      var uri = el("input", {"type": "text", "class": "vTextField", "aria-label": "Root " + n + " URI", "placeholder": "file:///home/me/project"});
      var name = el("input", {"type": "text", "class": "vTextField", "aria-label": "Root " + n + " name", "placeholder": "Project"});
      line.appendChild(el("td")).appendChild(uri);
      line.appendChild(el("td")).appendChild(name);
      rows.push([uri, name]);
    }
    add();
    box.appendChild(table);
    var more = el("button", {"type": "button", "class": "button"}, "Add a root");
    more.addEventListener("click", add);
    box.appendChild(more);
    return {read: function () {
      return {roots: rows.filter(function (r) { return r[0].value.trim() !== ""; })
        .map(function (r) { return {uri: r[0].value.trim(), name: r[1].value.trim()}; })};
    }};
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
    var viewBox = document.getElementById("try-view");
    var rawToggle = document.getElementById("try-raw-toggle");
    var era = document.getElementById("try-era");
    var mode = "raw";
    var generated = null;
    var runId = null;

    function showRaw(shown) {
      result.hidden = !shown;
      rawToggle.setAttribute("aria-expanded", shown ? "true" : "false");
      rawToggle.textContent = shown ? "Hide the raw JSON" : "Show the raw JSON";
    }
    rawToggle.addEventListener("click", function () { showRaw(result.hidden); });
    if (result.textContent.trim()) { rawToggle.hidden = false; showRaw(false); }

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
        status.textContent = "Running… (protocol " + event.version + ", the client declares " +
          (Object.keys(event.capabilities || {}).join(", ") || "nothing") + ")";
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
        } else if (message.method === "notifications/tasks/status") {
          note(at + " task " + params.taskId + ": " + params.status + (params.statusMessage ? " (" + params.statusMessage + ")" : ""), "task");
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
        drawView(event.view || {}, viewBox);
        viewBox.className = "try-view" + (event.is_error || event.protocol_error ? " try-is-error" : "");
        rawToggle.hidden = false;
        showRaw(false);
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

    /* A question of the call, answered as a client would: an elicitation's form (or its link, in URL
     * mode), the model's reply to a sampling request, the roots to share. */
    function ask(event) {
      var params = event.params || {};
      var method = event.method;
      var box = el("fieldset", {"class": "module try-question", "data-question": event.id, "data-method": method});
      var legends = {"sampling/createMessage": "The tool asks the client's model", "roots/list": "The tool asks for the client's roots"};
      box.appendChild(el("legend", {}, legends[method] || "The tool asks"));
      var choices = [["accept", "Accept", "button default"], ["decline", "Decline", "button"], ["cancel", "Cancel", "button"]];
      var read = function () { return {}; };
      var said = params.message || method;
      if (method === "sampling/createMessage") {
        said = "A reply from the model to this request: type it as the model would answer.";
        box.appendChild(el("p", {"class": "try-question-message"}, said));
        samplingRequest(params, box);
        var replyId = "try-reply-" + (++counter), modelId = "try-model-" + (++counter);
        var replyRow = box.appendChild(el("div", {"class": "form-row"}));
        replyRow.appendChild(el("label", {"for": replyId}, "The model's reply"));
        var reply = replyRow.appendChild(el("textarea", {"id": replyId, "rows": 4, "class": "vLargeTextField"}));
        var modelRow = box.appendChild(el("div", {"class": "form-row"}));
        modelRow.appendChild(el("label", {"for": modelId}, "Model name"));
        var model = modelRow.appendChild(el("input", {"id": modelId, "type": "text", "class": "vTextField", "placeholder": "typed-in-the-admin"}));
        read = function () { return {text: reply.value, model: model.value.trim()}; };
        choices = [["accept", "Send the reply", "button default"], ["decline", "Decline", "button"]];
      } else if (method === "roots/list") {
        said = "The folders or places the client shares with the server.";
        box.appendChild(el("p", {"class": "try-question-message"}, said));
        read = rootsEditor(box).read;
        choices = [["accept", "Share these roots", "button default"], ["decline", "Decline", "button"]];
      } else {
        box.appendChild(el("p", {"class": "try-question-message"}, params.message || method));
        if (params.mode === "url" && typeof params.url === "string" && /^https?:\/\//.test(params.url)) {
          var link = box.appendChild(el("p", {"class": "try-question-url"}, "The client would offer this page: "));
          link.appendChild(el("a", {"href": params.url, "target": "_blank", "rel": "noopener noreferrer"}, params.url));
        }
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
          read = answerForm.read;
        }
      }
      var row = el("div", {"class": "submit-row try-actions"});
      var run = runId;
      choices.forEach(function (choice) {
        var button = el("button", {"type": "button", "class": choice[2]}, choice[1]);
        button.addEventListener("click", function () {
          var content = choice[0] === "accept" ? read() : {};
          post(form.dataset.answerUrl, {
            run: run, question: event.id, method: method, action: choice[0], content: JSON.stringify(content)
          }).then(function (response) {
            return response.text().then(function (text) {
              // A refused answer (a root without a URI, an empty reply) can be fixed and sent again.
              box.disabled = response.ok;
              box.appendChild(el("p", {"class": response.ok ? "help" : "errornote"},
                response.ok ? "Answered: " + choice[0] + "." : "The answer was refused: " + text));
            });
          });
        });
        row.appendChild(button);
      });
      box.appendChild(row);
      questions.appendChild(box);
      note((event.ms / 1000).toFixed(1) + " s asked: " + said, "question");
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
      body.append("era", era.value);
      form.querySelectorAll("input[name=capability]:checked").forEach(function (box) {
        body.append("capability", box.value);
      });
      live.hidden = false;
      status.textContent = "Starting…";
      status.className = "";
      log.textContent = "";
      questions.textContent = "";
      result.textContent = "";
      viewBox.textContent = "";
      viewBox.className = "try-view";
      rawToggle.hidden = true;
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
