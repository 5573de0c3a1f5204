// The console works without this file; it adds a "select all" checkbox.
document.addEventListener("DOMContentLoaded", function () {
  var all = document.getElementById("select-all");
  if (!all) return;
  all.addEventListener("change", function () {
    document.querySelectorAll('input[name="ids"]').forEach(function (box) { box.checked = all.checked; });
  });
});
