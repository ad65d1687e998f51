// Shared by the nodes whose widgets follow another widget (ladr_policy.js, ladr_rules.js):
// run `refresh(node)` when a node is created, when a loaded workflow configures it and after
// any of the named widgets changes (the widget's own callback runs first), and tell an open
// right-hand Parameters panel to read the node again.

export function refreshOnChange(nodeType, names, refresh) {
  const created = nodeType.prototype.onNodeCreated;
  nodeType.prototype.onNodeCreated = function () {
    const out = created?.apply(this, arguments);
    for (const name of names.filter(Boolean)) {
      const widget = this.widgets?.find((w) => w.name === name);
      if (!widget) continue;
      const callback = widget.callback;
      widget.callback = (...args) => {
        const r = callback?.apply(widget, args);
        refresh(this);
        return r;
      };
    }
    refresh(this);
    return out;
  };
  const configured = nodeType.prototype.onConfigure;
  nodeType.prototype.onConfigure = function () {
    const out = configured?.apply(this, arguments);
    refresh(this); // a loaded workflow: follow the widgets it was saved with
    return out;
  };
}

// The Parameters panel lists a selected node's widgets when the selection changes:
// re-announce the selection so an open panel hides and greys what the node now does.
export function reannounceSelection(canvas, node) {
  if (canvas?.selected_nodes?.[node.id]) canvas.onSelectionChange?.(canvas.selected_nodes);
}
