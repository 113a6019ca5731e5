// Staff pages that refresh a part of themselves with htmx polling (hx-trigger="every …" on an
// element marked data-auto-refresh): a button pauses and resumes the refresh (WCAG 2.2.2), and a
// refresh never takes keyboard focus away. htmx puts focus back on the element of the same id
// after a swap; a refresh is skipped while focus sits on something inside without an id (a link,
// say), so that it stays where the person left it.
(function () {
  "use strict";
  var paused = false;

  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail.elt;
    if (!elt || !elt.hasAttribute("data-auto-refresh")) return;
    if (event.detail.requestConfig && event.detail.requestConfig.verb !== "get") return;
    var active = document.activeElement;
    if (paused || (active && active !== elt && elt.contains(active) && !active.id)) event.preventDefault();
  });

  document.addEventListener("DOMContentLoaded", function () {
    var toggle = document.querySelector("[data-refresh-toggle]");
    if (!toggle) return;
    var button = toggle.querySelector("button");
    var state = toggle.querySelector(".refresh-state");
    var running = state.textContent;
    toggle.hidden = false;
    button.addEventListener("click", function () {
      paused = !paused;
      button.textContent = paused ? "Resume updates" : "Pause updates";
      state.textContent = paused ? "Updates paused." : running;
    });
  });
})();
