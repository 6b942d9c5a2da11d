// Sortable, filterable tables of Anchorage pages (report.html and anchorage view); inlined into each page.
// Two kinds: a table written as HTML rows (sorted and filtered in the DOM), and a data table (class "data":
// its rows are JSON in <script type="application/json" id="data-ID">, rendered a page at a time, so a
// campaign of 10,000 trials opens at once). Both keep their sort, filter and page in the query string.
(function(){
  var persist = /^https?:$/.test(location.protocol);
  var params = new URLSearchParams(persist ? location.search : "");
  function save(){ if (persist) history.replaceState(null, "", location.pathname + (params.toString() ? "?" + params : "") + location.hash); }
  var BLANK = "\u2014";
  function keyOf(v){
    if (v === null || v === undefined || v === "" || v === BLANK) return [2, 0];
    if (typeof v === "number") return [0, v];
    var n = Number(v); return isFinite(n) && String(v).trim() !== "" ? [0, n] : [1, String(v).toLowerCase()];
  }
  function compare(a, b){ if (a[0] !== b[0]) return a[0] - b[0]; return a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0; }
  function order(items, key, dir){
    items.sort(function(x, y){
      var a = key(x), b = key(y);
      if (a[0] === 2 || b[0] === 2) return a[0] - b[0];   // blanks last in both directions
      var c = compare(a, b); return dir === "descending" ? -c : c;
    });
  }
  function terms(text){ return text.toLowerCase().split(/\s+/).filter(Boolean); }
  function matches(text, words){ return words.every(function(w){ return text.indexOf(w) >= 0; }); }
  function counter(table, shown, total){
    var count = document.querySelector("[data-count-for='" + table.id + "']");
    if (count) count.textContent = shown === total ? total + " rows" : shown + " of " + total + " rows";
  }
  function marks(table, col, dir){
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function(th, i){
      if (i === col) th.setAttribute("aria-sort", dir); else th.removeAttribute("aria-sort"); });
  }

  // ----- tables written as HTML rows -----
  function domKey(td){ var v = td.getAttribute("data-v"); return keyOf(v === null ? td.textContent.trim() : v); }
  function domTable(table){
    return {
      sort: function(col, dir){
        var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
        order(rows, function(r){ return domKey(r.cells[col]); }, dir);
        rows.forEach(function(r){ body.appendChild(r); });
        marks(table, col, dir);
      },
      filter: function(text){
        var words = terms(text), shown = 0, rows = table.tBodies[0].rows;
        Array.prototype.forEach.call(rows, function(r){
          var ok = matches(r.textContent.toLowerCase(), words);
          r.style.display = ok ? "" : "none"; if (ok) shown++; });
        counter(table, shown, rows.length);
      }
    };
  }

  // ----- data tables -----
  function fixed(v, col){
    if (v === null || v === undefined) return col.none || BLANK;
    if (typeof v !== "number") return String(v);
    var d = col.digits === undefined ? 4 : col.digits, r = Number(v.toFixed(d)) + 0;
    if (r === 0) r = 0;   // never "-0.0000"
    var s = r.toFixed(d); return col.sign && r >= 0 ? "+" + s : s;
  }
  function dataTable(table){
    var source = document.getElementById("data-" + table.id);
    var data = JSON.parse(source.textContent), cols = data.cols, strings = data.strings || [];
    var size = data.page || 100, page = 0, view = null, words = [];
    var rows = data.rows.map(function(raw, index){
      var cells = raw.map(function(v, i){
        var col = cols[i], text, href = null, sort = v;
        if (col.kind === "enum" && typeof v === "number") { v = strings[v]; sort = v; }
        if (Array.isArray(v)) { href = v[1]; v = v[0]; sort = v; }
        else if (col.href && v !== null) href = col.href.replace("{}", encodeURIComponent(v));
        text = col.kind === "num" ? fixed(v, col) : (v === null || v === undefined ? BLANK : String(v));
        return {text: text, sort: col.kind === "num" ? v : sort, href: href};
      });
      return {cells: cells, index: index, text: cells.map(function(c){ return c.text; }).join(" ").toLowerCase()};
    });
    var pager = document.querySelector("[data-pager-for='" + table.id + "']");
    function render(){
      var body = table.tBodies[0], pages = Math.max(1, Math.ceil(view.length / size));
      if (page >= pages) page = pages - 1;
      var frag = document.createDocumentFragment();
      view.slice(page * size, page * size + size).forEach(function(row){
        var tr = document.createElement("tr");
        row.cells.forEach(function(cell, i){
          var col = cols[i], td = document.createElement("td"), cls = [];
          if (col.left) cls.push("l");
          var c = col.classes && col.classes[cell.text]; if (c) cls.push(c);
          if (col.kind === "num" && cell.sort === null && col.noneClass) cls.push(col.noneClass);
          if (col.cls) cls.push(col.cls);
          if (cls.length) td.className = cls.join(" ");
          if (col.title) td.title = cell.text;
          if (cell.href) { var a = document.createElement("a"); a.href = cell.href; a.textContent = cell.text; td.appendChild(a); }
          else td.textContent = cell.text;
          tr.appendChild(td);
        });
        frag.appendChild(tr);
      });
      body.textContent = ""; body.appendChild(frag);
      counter(table, view.length, rows.length);
      if (pager) {
        pager.querySelector(".pages").textContent = view.length ? "rows " + (page * size + 1) + "\u2013" +
          Math.min(view.length, page * size + size) + " of " + view.length + " \u00b7 page " + (page + 1) + " of " + pages : "no rows";
        pager.querySelector(".prev").disabled = page === 0;
        pager.querySelector(".next").disabled = page >= pages - 1;
        pager.style.display = view.length > size ? "" : "none";
      }
    }
    function setPage(p){ page = p; if (p) params.set("page." + table.id, p + 1); else params.delete("page." + table.id); save(); render(); }
    if (pager) {
      pager.querySelector(".prev").addEventListener("click", function(){ setPage(Math.max(0, page - 1)); });
      pager.querySelector(".next").addEventListener("click", function(){ setPage(page + 1); });
    }
    var sorted = null;
    function apply(){
      view = rows.filter(function(r){ return matches(r.text, words); });
      if (sorted) order(view, function(r){ return keyOf(r.cells[sorted[0]].sort); }, sorted[1]);
    }
    var wantedPage = parseInt(params.get("page." + table.id) || "1", 10) - 1;
    page = wantedPage > 0 ? wantedPage : 0;
    view = rows.slice();
    return {
      sort: function(col, dir){ sorted = [col, dir]; apply(); marks(table, col, dir); render(); },
      filter: function(text){ words = terms(text); apply(); render(); },
      reset: function(){ page = 0; params.delete("page." + table.id); save(); },
      render: render
    };
  }

  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function(table){
    var data = table.classList.contains("data"), t = data ? dataTable(table) : domTable(table);
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function(th, i){
      th.classList.add("sortable");
      th.addEventListener("click", function(){
        var dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
        if (t.reset) t.reset();
        t.sort(i, dir); params.set("sort." + table.id, i + "." + (dir === "ascending" ? "asc" : "desc")); save();
      });
    });
    var wanted = params.get("sort." + table.id);
    if (wanted) { var p = wanted.split("."); t.sort(+p[0], p[1] === "desc" ? "descending" : "ascending"); }
    var box = document.querySelector("input[data-filter-for='" + table.id + "']");
    if (box) {
      box.value = params.get("q." + table.id) || "";
      box.addEventListener("input", function(){
        if (t.reset) t.reset();
        t.filter(box.value); if (box.value) params.set("q." + table.id, box.value); else params.delete("q." + table.id); save();
      });
      t.filter(box.value);
    } else if (t.render) t.render();
  });
})();
