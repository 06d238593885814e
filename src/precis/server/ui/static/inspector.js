// precis inspector: a turn's figures on tap (a phone has no hover). No other behaviour.
document.addEventListener("click", function (event) {
  var column = event.target.closest && event.target.closest("rect.col");
  var box = document.getElementById("turn-detail");
  if (!column || !box) return;
  var title = column.querySelector("title");
  box.textContent = title ? title.textContent : "";
});
