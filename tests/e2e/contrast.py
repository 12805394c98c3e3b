"""WCAG contrast of text as the browser draws it (docs/jupyterlab.md, "Colours and contrast").

:func:`low_contrast` walks every visible text node under the given roots and compares
its computed colour with its *effective* background: the background colours of the
element and its ancestors composited from the page down (translucent layers blended,
as the browser paints them), with the text's own alpha and its ancestors' opacity
blended in too. Disabled controls are skipped (WCAG 1.4.3 exempts inactive UI).
"""

from __future__ import annotations

from typing import Any

WALK = r"""
([selectors, minimum]) => {
  const parse = css => {
    let m = css.match(/^rgba?\(([^)]+)\)$/);
    if (m) {
      const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
      return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
    }
    m = css.match(/^color\(srgb ([^)]+)\)$/);
    if (m) {
      const p = m[1].split(/[\s\/]+/).filter(Boolean).map(Number);
      return [p[0] * 255, p[1] * 255, p[2] * 255, p.length > 3 ? p[3] : 1];
    }
    return null;
  };
  const over = (top, below) => {  // top (rgba) painted over an opaque colour
    const a = top[3];
    return [0, 1, 2].map(i => top[i] * a + below[i] * (1 - a));
  };
  const lum = c => {
    const l = c.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
    return 0.2126 * l[0] + 0.7152 * l[1] + 0.0722 * l[2];
  };
  const ratio = (a, b) => { const [hi, lo] = [lum(a), lum(b)].sort((x, y) => y - x); return (hi + 0.05) / (lo + 0.05); };
  const background = el => {
    const chain = [];
    for (let n = el; n && n.nodeType === 1; n = n.parentElement) chain.push(n);
    let bg = [255, 255, 255];
    for (const n of chain.reverse()) {
      const c = parse(getComputedStyle(n).backgroundColor);
      if (c && c[3] > 0) bg = over(c, bg);
    }
    return bg;
  };
  const opacity = el => {
    let o = 1;
    for (let n = el; n && n.nodeType === 1; n = n.parentElement) o *= parseFloat(getComputedStyle(n).opacity);
    return o;
  };
  const path = el => {
    const parts = [];
    for (let n = el; n && n.nodeType === 1 && parts.length < 4; n = n.parentElement) {
      parts.unshift(n.tagName.toLowerCase() + (n.classList.length ? '.' + [...n.classList].slice(0, 2).join('.') : ''));
    }
    return parts.join(' > ');
  };
  const bad = [];
  let checked = 0;
  for (const selector of selectors) {
    for (const root of document.querySelectorAll(selector)) {
      const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
      for (let t = walker.nextNode(); t; t = walker.nextNode()) {
        const text = t.textContent.trim();
        const el = t.parentElement;
        if (!text || !el || el.closest(':disabled, [disabled], [aria-disabled="true"], mjx-assistive-mml')) continue;
        const style = getComputedStyle(el);
        if (style.visibility !== 'visible' || parseFloat(style.fontSize) === 0) continue;
        const range = document.createRange();
        range.selectNodeContents(t);
        const box = range.getBoundingClientRect();
        if (box.width === 0 || box.height === 0) continue;
        const colour = parse(style.color);
        if (!colour) continue;
        const bg = background(el);
        const fg = over([colour[0], colour[1], colour[2], colour[3] * opacity(el)], bg);
        const r = ratio(fg, bg);
        checked += 1;
        if (r < minimum) {
          bad.push({text: text.slice(0, 40), ratio: Math.round(r * 100) / 100, color: style.color,
                    background: 'rgb(' + bg.map(Math.round).join(', ') + ')', where: path(el)});
        }
      }
    }
  }
  return {checked, bad};
}
"""


def low_contrast(page: Any, selectors: list[str], minimum: float = 4.5) -> tuple[int, list[dict[str, Any]]]:
    """How many text nodes under ``selectors`` were measured, and those whose contrast
    against their effective background is below ``minimum``."""
    result = page.evaluate(WALK, [selectors, minimum])
    return result["checked"], result["bad"]


def set_theme(page: Any, theme: str) -> None:
    """Switch JupyterLab's theme (``JupyterLab Light``/``JupyterLab Dark``) and wait until
    it is applied."""
    light = "true" if theme == "JupyterLab Light" else "false"
    page.evaluate("(theme) => window.jupyterapp.commands.execute('apputils:change-theme', {theme})", theme)
    page.wait_for_function("(light) => document.body.dataset.jpThemeLight === light", arg=light)
    page.wait_for_function("() => !document.querySelector('#jupyterlab-splash')")
    page.wait_for_timeout(500)  # the theme's stylesheet applied everywhere
