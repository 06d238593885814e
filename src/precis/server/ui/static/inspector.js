// precis inspector: a turn's figures on tap (a phone has no hover), and live turns appended to
// the chart as the stream sends them (each new sample and marker once; the page never fetches
// the chart again). Text goes in as text, never as markup.
document.addEventListener("click", function (event) {
  var column = event.target.closest && event.target.closest("rect.col");
  var box = document.getElementById("turn-detail");
  if (!column || !box) return;
  var title = column.querySelector("title");
  box.textContent = title ? title.textContent : "";
});

(function () {
  var SVG = "http://www.w3.org/2000/svg";
  var live = document.getElementById("live");
  if (!live) return;

  function frame() {
    return document.querySelector(".chart-frame");
  }

  function fixed(value) {
    return String(Math.round(value * 10) / 10);
  }

  function element(name, attributes, text) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attributes).forEach(function (key) {
      node.setAttribute(key, attributes[key]);
    });
    if (text !== undefined) {
      var title = document.createElementNS(SVG, "title");
      title.textContent = text;
      node.appendChild(title);
    }
    return node;
  }

  // The turn a sample is drawn at: a compaction at the turn before it (a step, not a slope).
  function drawnAt(sample) {
    return sample.kind === "compaction" && sample.turn > 1 ? sample.turn - 1 : sample.turn;
  }

  // Widen the chart's turn axis to `turn`: the plot is squeezed to fit, the new turn at the end.
  function reach(svg, turn) {
    var d = svg.dataset;
    var first = +d.first, last = +d.last, x0 = +d.x0;
    var shown = Math.max(+(d.shown || last), turn);
    d.shown = shown;
    var squeeze = (last - first) / (shown - first);
    svg.querySelectorAll("g.plot").forEach(function (plot) {
      plot.setAttribute(
        "transform",
        "translate(" + x0 + " 0) scale(" + squeeze + " 1) translate(" + -x0 + " 0)"
      );
    });
  }

  function xOf(svg, turn) {
    var d = svg.dataset;
    return +d.x0 + ((turn - +d.first) / (+d.last - +d.first)) * (+d.x1 - +d.x0);
  }

  function yOf(svg, tokens) {
    var d = svg.dataset;
    return +d.y0 - (Math.min(tokens, +d.top) / +d.top) * (+d.y0 - +d.y1);
  }

  function addTurn(svg, sample, names) {
    var at = drawnAt(sample);
    var x = fixed(xOf(svg, at));
    var base = fixed(+svg.dataset.y0);
    var height = 0;
    names.forEach(function (name) {
      height += name in sample.parts ? sample.parts[name] : sample[name] || 0;
      var path = svg.querySelector("path.part-" + name);
      if (!path) return;
      var points = path.getAttribute("d").slice(1, -1).split("L");
      var floor = points.splice(-2);
      points.push(x + "," + fixed(yOf(svg, height)));
      floor[0] = x + "," + base;
      path.setAttribute("d", "M" + points.concat(floor).join("L") + "Z");
    });
    var columns = svg.querySelector("g.columns");
    if (columns) {
      var of = sample.window ? " of " + sample.window.toLocaleString("en") : "";
      var text =
        "turn " + sample.turn + " (" + sample.kind + "): " +
        sample.total.toLocaleString("en") + of + " tokens\n" +
        sample.in_context + " messages in context";
      var top = +svg.dataset.y1;
      columns.appendChild(
        element("rect", {
          class: "col", x: fixed(+x - 3), y: fixed(top), width: "6",
          height: fixed(+svg.dataset.y0 - top), fill: "#000", "fill-opacity": "0",
        }, text)
      );
    }
    reach(svg, at);
  }

  function addMarker(svg, marker, base) {
    var x = fixed(xOf(svg, marker.turn > 1 ? marker.turn - 1 : marker.turn));
    var top = fixed(+svg.dataset.y1), bottom = fixed(+svg.dataset.y0);
    var link = element("a", {
      class: "marker", href: base + "/compactions/" + (marker.event + 1),
      "data-key": String(marker.event), "data-count": "1",
    });
    link.appendChild(
      element("line", {
        x1: x, y1: top, x2: x, y2: bottom, stroke: marker.color, "stroke-width": "1.5",
      }, "compaction " + (marker.event + 1) + ": " + marker.trigger + ", " + marker.mode)
    );
    var plots = svg.querySelectorAll("g.plot");
    plots[plots.length - 1].appendChild(link);
  }

  function listMarker(marker, base) {
    var list = document.querySelector("ol.compactions");
    if (!list) return;
    var item = document.createElement("li");
    item.value = marker.event + 1;
    var link = document.createElement("a");
    link.className = "compaction-link";
    link.href = base + "/compactions/" + (marker.event + 1);
    link.textContent = "compaction " + (marker.event + 1);
    item.appendChild(link);
    var count = function (n) { return typeof n === "number" ? n.toLocaleString("en") : "?"; };
    item.appendChild(document.createTextNode(
      " at turn " + marker.turn + ": " + marker.trigger + ", " + marker.mode + ", " +
      count(marker.tokens_before) + " → " + count(marker.tokens_after) + " tokens"
    ));
    list.insertBefore(item, list.firstChild);
  }

  live.addEventListener("turn", function (event) {
    var box = frame();
    var sample = JSON.parse(event.detail.data);
    if (!box || sample.turn <= +box.dataset.turns) return; // sent again after a reconnect
    var charts = document.querySelectorAll("svg.chart");
    box.dataset.turns = sample.turn;
    if (!charts.length) {
      // No chart yet (the page had no turn to draw): the first one is fetched once, whole.
      if (box.dataset.fetching) return;
      box.dataset.fetching = "1";
      fetch(box.dataset.base + "/chart", { credentials: "same-origin" })
        .then(function (answer) { return answer.ok ? answer.text() : ""; })
        .then(function (html) {
          if (html) document.getElementById("chart").innerHTML = html;
        });
      return;
    }
    var names = (box.dataset.parts || "").split(" ");
    charts.forEach(function (svg) {
      addTurn(svg, sample, names);
    });
  });

  // The store failed a read: the stream has ended (the browser opens it again later).
  live.addEventListener("failed", function (event) {
    var note = document.getElementById("live-note");
    if (!note) return;
    note.textContent = "Live updates paused: " + event.detail.data;
    note.hidden = false;
  });

  live.addEventListener("compaction", function (event) {
    var box = frame();
    var marker = JSON.parse(event.detail.data);
    if (!box || marker.event < +box.dataset.compactions) return;
    document.querySelectorAll("svg.chart").forEach(function (svg) {
      addMarker(svg, marker, box.dataset.base);
    });
    listMarker(marker, box.dataset.base);
    box.dataset.compactions = marker.event + 1;
  });
})();
