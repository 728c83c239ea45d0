// DOM helpers. Server data only ever reaches the page through textContent, never innerHTML.
//
// No template library: the pages are rendered on the server (views/*.templ) with a data-testid
// on everything the script fills in, the script writes text and attributes into those, and copies
// a <template> of the page for what repeats (an order of the box, an item row, a sale's
// controls). What it still builds itself is a few table rows and list items with el(); a library
// such as lit-html would replace those few lines with a vendored dependency.

export function byTestId(id, root) {
  return (root || document).querySelector('[data-testid="' + id + '"]');
}

export function allByTestId(id, root) {
  return Array.prototype.slice.call((root || document).querySelectorAll('[data-testid="' + id + '"]'));
}

export function setText(el, text) {
  if (el && el.textContent !== text) {
    el.textContent = text;
  }
}

export function show(el, visible) {
  if (el) {
    el.hidden = !visible;
  }
}

export function el(tag, attrs, text) {
  var node = document.createElement(tag);
  if (attrs) {
    Object.keys(attrs).forEach(function (k) {
      node.setAttribute(k, attrs[k]);
    });
  }
  if (text !== undefined && text !== null) {
    node.textContent = String(text);
  }
  return node;
}

export function enc(id) {
  return encodeURIComponent(String(id));
}

// messenger writes a sentence into a page's role="status" message area. link, if given
// ({text, href, testid, after}), follows the sentence as a real link. say.shows(text) tells
// whether the area still shows that sentence (no other has taken its place).
export function messenger(area) {
  var say = function (text, kind, link) {
    if (!area) {
      return;
    }
    area.textContent = text || '';
    if (link && link.href) {
      area.appendChild(el('a', { href: link.href, 'data-testid': link.testid || 'message-link' }, link.text));
      if (link.after) {
        area.appendChild(document.createTextNode(link.after));
      }
    }
    area.setAttribute('data-kind', kind || 'info');
  };
  say.shows = function (text) {
    return !!area && area.textContent === text;
  };
  return say;
}
