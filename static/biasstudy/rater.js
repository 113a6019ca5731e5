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

  // Single-key shortcuts (1, 2, 3, F) act only while focus is inside the vote form, never on
  // arrow keys (they scroll), and a rater can turn them off (WCAG 2.1.4); the choice is kept
  // in this browser.
  var STORE = "biasstudy.shortcuts";

  function shortcutsOn() {
    try { return window.localStorage.getItem(STORE) !== "off"; } catch (e) { return true; }
  }

  function showShortcuts(on) {
    document.body.classList.toggle("shortcuts-off", !on);
  }

  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey || event.repeat || !shortcutsOn()) return;
    var target = event.target;
    var form = currentForm();
    if (!form || !target || !form.contains(target)) return;
    if (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName) && target.type !== "checkbox") return;
    if (event.key.length !== 1) return;
    var key = event.key.toLowerCase();
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

  function focusQuestion() {
    var text = document.getElementById("question-text");
    if (text) text.focus({ preventScroll: true });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var toggle = document.querySelector("[data-shortcuts-toggle]");
    if (toggle) {
      var box = toggle.querySelector("input");
      box.checked = shortcutsOn();
      showShortcuts(box.checked);
      toggle.hidden = false;
      box.addEventListener("change", function () {
        try { window.localStorage.setItem(STORE, box.checked ? "on" : "off"); } catch (e) { /* kept for this page only */ }
        showShortcuts(box.checked);
      });
    }
    if (currentForm()) {
      startClock();
      // The question is the page's content: start there, so the shortcuts work at once.
      if (document.activeElement === document.body) focusQuestion();
    }
    // MTurk: the done page hands the assignment back by itself (the button stays for no-JS).
    var submit = document.querySelector("form[data-auto-submit]");
    if (submit) submit.requestSubmit();
  });

  // Prolific: the done page shows the code, then takes the rater back after a few seconds
  // (the link does it at once without this file; "Stay on this page" cancels).
  document.addEventListener("DOMContentLoaded", function () {
    var box = document.querySelector("[data-return-to]");
    if (!box) return;
    var status = box.querySelector("[data-return-status]");
    var stay = box.querySelector("[data-return-stay]");
    var seconds = parseInt(box.getAttribute("data-return-seconds"), 10) || 10;
    var platform = box.getAttribute("data-return-platform");
    status.textContent = "Taking you back to " + platform + " in " + seconds + " seconds.";
    var timer = window.setTimeout(function () {
      status.textContent = "Taking you back to " + platform + "…";
      window.location.assign(box.getAttribute("data-return-to"));
    }, seconds * 1000);
    stay.hidden = false;
    stay.addEventListener("click", function () {
      window.clearTimeout(timer);
      stay.hidden = true;
      status.textContent = "You stay on this page. Use the link to go back to " + platform + " when you are ready.";
    });
  });

  // The completion code's copy button: copy.js, shared with the staff pages.

  document.addEventListener("htmx:afterSwap", function (event) {
    // A "try again" alert (429, 503) keeps the item on screen: its clock must keep running.
    if (event.detail.xhr && event.detail.xhr.status !== 200) return;
    var task = document.querySelector("[data-task]");
    if (!task) return;
    startClock();
    window.scrollTo(0, 0);
    focusQuestion();
    var status = document.getElementById("task-status");
    if (status) status.textContent = task.getAttribute("data-announce") || "";
  });
})();
