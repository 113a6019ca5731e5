// Copy buttons (the rater's completion code, the study's links in the admin): a button with
// data-copy="ID" copies the text of element ID and says so in the element its aria-controls
// names. The buttons stay hidden where the clipboard cannot be written.
(function () {
  "use strict";
  document.addEventListener("click", function (event) {
    var button = event.target.closest ? event.target.closest("[data-copy]") : null;
    if (!button) return;
    var text = document.getElementById(button.getAttribute("data-copy")).textContent.trim();
    var status = document.getElementById(button.getAttribute("aria-controls") || "copy-status");
    navigator.clipboard.writeText(text).then(function () {
      if (status) status.textContent = button.hasAttribute("data-copy-echo") ? "Copied: " + text : "Copied.";
    }, function () {
      if (status) status.textContent = "Could not copy: please select it and copy it by hand.";
    });
  });

  document.addEventListener("DOMContentLoaded", function () {
    if (!navigator.clipboard) return;
    var buttons = document.querySelectorAll("[data-copy]");
    for (var i = 0; i < buttons.length; i++) buttons[i].hidden = false;
  });
})();
