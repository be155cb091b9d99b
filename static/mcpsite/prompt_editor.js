/* A prompt's messages edited as messages (AMB-261): per message a role and one content block, text
 * (a template over the arguments), an image (uploaded here, sent as base64) or an embedded resource
 * (its URI). Every edit writes the JSON the server checks (root.setJSON); "Edit as JSON" is one click
 * away, and messages the editor cannot show (annotations, audio, a resource link...) keep the JSON view
 * with a note. Loaded before schema_table.js, which starts it on [data-structured=messages]. */
(function () {
  "use strict";
  var S = window.McpStructured = window.McpStructured || {};
  var BLOCK_KEYS = {text: ["type", "text"], image: ["type", "data", "mimeType"], resource: ["type", "uri"]};
  var LABELS = {text: "Text", image: "Image", resource: "Embedded resource"};

  function Messages(root) {
    var el = S.el;
    var writing = false;
    var wrap = el("div", {"class": "prompt-messages", "data-table-for": root.dataset.field});
    var list = el("div", {"class": "prompt-message-list"});
    var add = el("button", {type: "button", "class": "button structured-add", text: "Add a message"});
    var toggle = el("button", {type: "button", "class": "button structured-toggle", text: "Edit as JSON"});
    var note = el("p", {"class": "structured-note", role: "note"});
    [list, add, toggle, note].forEach(function (n) { wrap.appendChild(n); });
    root.insertBefore(wrap, root.firstChild);  // inside the field, above its JSON view

    function shown(messages) {
      if (messages === null) return {items: []};
      if (!Array.isArray(messages)) return {why: "it is not a list"};
      for (var i = 0; i < messages.length; i++) {
        var m = messages[i];
        if (!S.isObject(m) || !S.onlyKeys(m, ["role", "content"]) || !S.isObject(m.content)) {
          return {why: "message " + (i + 1) + " is not a role and a content block"};
        }
        var keys = BLOCK_KEYS[m.content.type];
        if (!keys || !S.onlyKeys(m.content, keys)) {
          return {why: "message " + (i + 1) + " has a block the editor does not show"};
        }
      }
      return {items: messages};
    }

    function read() {
      return Array.prototype.map.call(list.children, function (box) {
        var type = box.querySelector("[data-part=type]").value;
        var content = {type: type};
        if (type === "text") content.text = box.querySelector("[data-part=text]").value;
        if (type === "image") {
          content.data = box.dataset.data || "";
          content.mimeType = box.dataset.mimeType || "image/png";
        }
        if (type === "resource") content.uri = box.querySelector("[data-part=uri]").value;
        return {role: box.querySelector("[data-part=role]").value, content: content};
      });
    }

    function write() {
      writing = true;
      root.setJSON(read());
      writing = false;
    }

    function select(part, options, chosen, label) {
      var node = el("select", {"data-part": part, "aria-label": label});
      Object.keys(options).forEach(function (value) {
        var option = el("option", {value: value, text: options[value]});
        if (value === chosen) option.selected = true;
        node.appendChild(option);
      });
      return node;
    }

    function addMessage(message) {
      var content = message.content || {type: "text", text: ""};
      var box = el("div", {"class": "prompt-message"});
      var n = list.children.length + 1;
      var role = select("role", {user: "user", assistant: "assistant"}, message.role || "user", "Role of message " + n);
      var type = select("type", LABELS, content.type, "Content of message " + n);
      var text = el("textarea", {"data-part": "text", "aria-label": "Text of message " + n});
      text.value = content.text || "";
      var uri = el("input", {type: "text", "data-part": "uri", size: 40, value: content.uri || "",
        placeholder: "docs://readme", "aria-label": "Resource URI of message " + n});
      var file = el("input", {type: "file", accept: "image/*", "aria-label": "Image of message " + n});
      var img = el("img", {alt: "The image of message " + n});
      box.dataset.data = content.data || "";
      box.dataset.mimeType = content.mimeType || "";
      function preview() {
        img.hidden = !box.dataset.data;
        if (box.dataset.data) img.src = "data:" + box.dataset.mimeType + ";base64," + box.dataset.data;
      }
      function parts() {
        text.hidden = type.value !== "text";
        uri.hidden = type.value !== "resource";
        file.hidden = img.hidden = type.value !== "image";
        if (type.value === "image") preview();
      }
      file.addEventListener("change", function () {
        var chosen = file.files[0];
        if (!chosen) return;
        var reader = new FileReader();
        reader.onload = function () {
          var url = String(reader.result);
          box.dataset.mimeType = chosen.type || "image/png";
          box.dataset.data = url.slice(url.indexOf(",") + 1);
          preview();
          write();
        };
        reader.readAsDataURL(chosen);
      });
      var remove = el("button", {type: "button", "class": "button structured-remove", text: "Remove",
        "aria-label": "Remove message " + n});
      remove.addEventListener("click", function () { box.remove(); write(); });
      role.addEventListener("change", write);
      type.addEventListener("change", function () { parts(); write(); });
      text.addEventListener("input", write);
      uri.addEventListener("input", write);
      [role, type, remove, text, uri, file, img].forEach(function (node) { box.appendChild(node); });
      list.appendChild(box);
      parts();
      return box;
    }

    function view(json, why) {
      root.classList.toggle("table-mode", !json);
      list.hidden = add.hidden = json;
      toggle.textContent = json ? "Edit as messages" : "Edit as JSON";
      note.textContent = why ? "The editor cannot show these messages (" + why + "): edit them as JSON." : "";
    }

    function refresh() {
      var value;
      try { value = root.getJSON(); } catch (err) { view(true, "the JSON is not valid"); return; }
      var found = shown(value);
      if (found.why) { view(true, found.why); return; }
      list.textContent = "";
      found.items.forEach(addMessage);
      if (toggle.dataset.chosen !== "json") view(false, null);
    }

    add.addEventListener("click", function () {
      addMessage({role: "user", content: {type: "text", text: ""}}).querySelector("textarea").focus();
      write();
    });
    toggle.addEventListener("click", function () {
      toggle.dataset.chosen = root.classList.contains("table-mode") ? "json" : "";
      if (toggle.dataset.chosen === "json") view(true, null);
      else refresh();
    });
    root.addEventListener("json-editor:set", function () { if (!writing) refresh(); });
    root.addEventListener("json-editor:change", function () { if (!root.classList.contains("table-mode")) refresh(); });
    refresh();
  }

  S.Messages = Messages;
})();
