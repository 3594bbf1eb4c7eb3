// Copy buttons: the command in data-copy goes to the clipboard. navigator.clipboard needs a
// secure context; a report opened from disk or a mail attachment may not be one, so fall back
// to a selected textarea and execCommand.
(function () {
  "use strict";
  function fallback(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (err) { ok = false; }
    document.body.removeChild(area);
    return ok;
  }
  function show(button, ok) {
    if (!ok) {  // leave the command selected, for Ctrl+C
      var range = document.createRange();
      range.selectNodeContents(button.parentNode.querySelector("pre"));
      window.getSelection().removeAllRanges();
      window.getSelection().addRange(range);
    }
    button.textContent = ok ? "Copied" : "Selected: press Ctrl+C";
    button.setAttribute("data-state", ok ? "copied" : "selected");  // stays, unlike the text
    window.setTimeout(function () { button.textContent = "Copy"; }, 1500);
  }
  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("button.copy") : null;
    if (!button) { return; }
    var text = button.getAttribute("data-copy") || "";
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(
        function () { show(button, true); },
        function () { show(button, fallback(text)); }
      );
    } else {
      show(button, fallback(text));
    }
  });
})();
