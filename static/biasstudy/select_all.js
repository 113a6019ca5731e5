// "Select all on this page": a checkbox with data-select-all="NAME" ticks or clears every
// checkbox named NAME in its form, and shows whether all, some or none of them are ticked.
// Hidden (its label carries data-select-all-label) until this script runs.
(function () {
  "use strict";
  function boxes(master) {
    return master.form.querySelectorAll('input[type="checkbox"][name="' + master.getAttribute("data-select-all") + '"]');
  }
  function update(master) {
    var all = boxes(master), ticked = 0;
    for (var i = 0; i < all.length; i++) if (all[i].checked) ticked++;
    master.checked = all.length > 0 && ticked === all.length;
    master.indeterminate = ticked > 0 && ticked < all.length;
  }
  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target.hasAttribute("data-select-all")) {
      var all = boxes(target);
      for (var i = 0; i < all.length; i++) all[i].checked = target.checked;
      return;
    }
    if (!target.form || target.type !== "checkbox") return;
    var masters = target.form.querySelectorAll("[data-select-all]");
    for (var j = 0; j < masters.length; j++) {
      if (masters[j].getAttribute("data-select-all") === target.name) update(masters[j]);
    }
  });
  document.addEventListener("DOMContentLoaded", function () {
    var labels = document.querySelectorAll("[data-select-all-label]");
    for (var i = 0; i < labels.length; i++) {
      var master = labels[i].querySelector("[data-select-all]");
      if (boxes(master).length) labels[i].hidden = false;
    }
  });
})();
