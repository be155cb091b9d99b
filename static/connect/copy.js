// Copy buttons of the connect page: <button data-copy="ID"> copies the text of the element #ID.
// The Clipboard API needs a secure context (HTTPS or localhost); elsewhere the selection is copied.
"use strict";
(function () {
  function selectAndCopy(element) {
    const range = document.createRange();
    range.selectNodeContents(element);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    const copied = document.execCommand && document.execCommand("copy");
    if (copied) selection.removeAllRanges();
    return copied;
  }

  async function copy(button) {
    const source = document.getElementById(button.dataset.copy);
    if (!source) return;
    let done = false;
    try {
      if (navigator.clipboard && window.isSecureContext) {
        await navigator.clipboard.writeText(source.textContent);
        done = true;
      }
    } catch (error) {
      done = false;
    }
    if (!done) done = selectAndCopy(source);
    // Not copied: the text stays selected, so Ctrl+C (⌘C) copies it.
    button.textContent = done ? "Copied" : "Selected: press Ctrl+C";
    button.classList.toggle("copied", done);
    clearTimeout(button._reset);
    button._reset = setTimeout(function () {
      button.textContent = "Copy";
      button.classList.remove("copied");
    }, 2500);
  }

  document.addEventListener("click", function (event) {
    const button = event.target.closest("button[data-copy]");
    if (button) copy(button);
  });
})();
