// A link into the console (a notification's /approvals#ID) opens the item after login: the
// part after # never reaches the server, so the form carries it.
(function () {
  "use strict";
  const form = document.getElementById("login");
  if (!form) return;
  form.addEventListener("submit", () => {
    form.elements.fragment.value = location.hash.slice(1);
  });
})();
