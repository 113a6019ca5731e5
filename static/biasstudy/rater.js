// The rater's task page: response time measured in the browser, keyboard shortcuts, and focus
// after htmx swaps in the next item. Everything works without this file (plain form posts).
(function () {
  "use strict";

  // Time from the moment both answers are visible to the click, paused while the tab is hidden.
  var elapsed = 0;
  var since = null;

  function startClock() {
    elapsed = 0;
    since = document.visibilityState === "visible" ? performance.now() : null;
  }

  function readClock() {
    return Math.round(elapsed + (since === null ? 0 : performance.now() - since));
  }

  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden" && since !== null) {
      elapsed += performance.now() - since;
      since = null;
    } else if (document.visibilityState === "visible" && since === null) {
      since = performance.now();
    }
  });

  // Capture phase: runs before htmx reads the form, so the time travels with the vote.
  document.addEventListener("submit", function (event) {
    var field = event.target.querySelector("[data-client-ms]");
    if (field) field.value = String(readClock());
  }, true);

  function currentForm() {
    return document.querySelector("[data-task] form.vote");
  }

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey || event.repeat) return;
    var target = event.target;
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName) && target.type !== "checkbox")) return;
    var form = currentForm();
    if (!form) return;
    var key = event.key.length === 1 ? event.key.toLowerCase() : event.key;
    var box = form.querySelector("[data-key]");
    if (box && key === box.getAttribute("data-key")) {
      event.preventDefault();
      box.checked = !box.checked;
      return;
    }
    var buttons = form.querySelectorAll("button[data-keys]");
    for (var i = 0; i < buttons.length; i++) {
      if (buttons[i].getAttribute("data-keys").split(" ").indexOf(key) !== -1) {
        event.preventDefault();
        if (!buttons[i].disabled) buttons[i].click();
        return;
      }
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    if (currentForm()) startClock();
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    // A "try again" alert (429, 503) keeps the item on screen: its clock must keep running.
    if (event.detail.xhr && event.detail.xhr.status !== 200) return;
    var task = document.querySelector("[data-task]");
    if (!task) return;
    startClock();
    window.scrollTo(0, 0);
    var title = document.getElementById("question-title");
    if (title) title.focus({ preventScroll: true });
  });
})();
