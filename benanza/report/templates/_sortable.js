// Click a column header to sort its table (numbers by value, text alphabetically); again to reverse.
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("thead th").forEach(function (th, col) {
    th.title = "click to sort";
    th.addEventListener("click", function () {
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var dir = th.dataset.dir === "asc" ? -1 : 1;
      th.dataset.dir = dir === 1 ? "asc" : "desc";
      function key(row) {
        var cell = row.cells[col];
        var v = cell ? cell.getAttribute("data-v") : null;
        return v === null ? (cell ? cell.textContent : "") : parseFloat(v);
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (typeof x === "number" && typeof y === "number") { return dir * (x - y); }
        if (typeof x === "number") { return -1; }
        if (typeof y === "number") { return 1; }
        return dir * String(x).localeCompare(String(y));
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
