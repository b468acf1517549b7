// Every page of the operator console: "/" focuses the page's search box (an element with a
// data-search attribute, or the input of a role=search form), as on GitHub or MDN. Typing "/"
// into a field still types it; a page without a search box ignores the key.
(function () {
  "use strict";

  function typing(target) {
    if (!target || !target.closest) { return false; }
    return Boolean(target.closest("input, textarea, select, [contenteditable=''], [contenteditable=true]"));
  }

  function searchBox() {
    return document.querySelector("[data-search]") ||
      document.querySelector("[role=search] input[type=search], [role=search] input[type=text], input[role=search]");
  }

  document.addEventListener("keydown", function (event) {
    if (event.key !== "/" || event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) { return; }
    var box = searchBox();
    if (!box) { return; }
    event.preventDefault();
    box.focus();
    if (box.select) { box.select(); }
  });
})();
