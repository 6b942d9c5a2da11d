// Sortable, filterable tables of Anchorage pages (report.html and anchorage view); inlined into each page.
(function(){
  var persist = /^https?:$/.test(location.protocol);
  var params = new URLSearchParams(persist ? location.search : "");
  function save(){ if (persist) history.replaceState(null, "", location.pathname + (params.toString() ? "?" + params : "") + location.hash); }
  function key(td){
    var v = td.getAttribute("data-v"); if (v === null) v = td.textContent.trim();
    if (v === "" || v === "\u2014") return [2, 0];
    var n = Number(v); return isFinite(n) && v.trim() !== "" ? [0, n] : [1, v.toLowerCase()];
  }
  function compare(a, b){ if (a[0] !== b[0]) return a[0] - b[0]; return a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0; }
  function sort(table, col, dir){
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    rows.sort(function(r1, r2){
      var a = key(r1.cells[col]), b = key(r2.cells[col]);
      if (a[0] === 2 || b[0] === 2) return a[0] - b[0];   // blanks last in both directions
      var c = compare(a, b); return dir === "descending" ? -c : c;
    });
    rows.forEach(function(r){ body.appendChild(r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function(th, i){
      if (i === col) th.setAttribute("aria-sort", dir); else th.removeAttribute("aria-sort"); });
  }
  function filter(table, text){
    var terms = text.toLowerCase().split(/\s+/).filter(Boolean), shown = 0, rows = table.tBodies[0].rows;
    Array.prototype.forEach.call(rows, function(r){
      var t = r.textContent.toLowerCase(), ok = terms.every(function(w){ return t.indexOf(w) >= 0; });
      r.style.display = ok ? "" : "none"; if (ok) shown++; });
    var count = document.querySelector("[data-count-for='" + table.id + "']");
    if (count) count.textContent = shown + " of " + rows.length + " rows";
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function(table){
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function(th, i){
      th.classList.add("sortable");
      th.addEventListener("click", function(){
        var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
        sort(table, i, dir); params.set("sort." + table.id, i + "." + (dir === "ascending" ? "asc" : "desc")); save();
      });
    });
    var wanted = params.get("sort." + table.id);
    if (wanted) { var p = wanted.split("."); sort(table, +p[0], p[1] === "desc" ? "descending" : "ascending"); }
    var box = document.querySelector("input[data-filter-for='" + table.id + "']");
    if (box) {
      box.value = params.get("q." + table.id) || "";
      box.addEventListener("input", function(){
        filter(table, box.value); if (box.value) params.set("q." + table.id, box.value); else params.delete("q." + table.id); save();
      });
      filter(table, box.value);
    }
  });
})();
