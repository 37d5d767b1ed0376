"""UI dumps: parsing real uiautomator output, SimDroid's XML round trip, and the compact tree."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distrl_core.envs.observation import UIElement, compact_tree, elements_to_xml, parse_bounds, parse_ui_xml


def _node(attrs: str, children: str = "") -> str:
    defaults = (
        'index="0" resource-id="" package="com.android.settings" checkable="false" checked="false" '
        'clickable="false" enabled="true" focusable="false" focused="false" scrollable="false" '
        'long-clickable="false" password="false" selected="false"'
    )
    merged = {}
    for part in (defaults + " " + attrs).split('" '):
        if "=" in part:
            key, _, value = part.partition("=")
            merged[key.strip()] = value.strip().strip('"')
    rendered = " ".join(f'{k}="{v}"' for k, v in merged.items())
    if children:
        return f"<node {rendered}>{children}</node>"
    return f"<node {rendered} />"


# Shaped like `adb shell uiautomator dump /dev/tty` on an Android 14 emulator: a warning line before
# the XML, nested layout containers, and the status line uiautomator appends after the document.
REAL_DUMP = (
    "WARNING: linker: unused DT entry\n"
    "<?xml version='1.0' encoding='UTF-8' standalone='yes' ?><hierarchy rotation=\"0\">"
    + _node(
        'text="" class="android.widget.FrameLayout" content-desc="" bounds="[0,0][1080,2400]"',
        _node(
            'text="" class="android.widget.LinearLayout" content-desc="" bounds="[0,63][1080,2400]"',
            _node(
                'text="" class="android.widget.ImageButton" content-desc="Navigate up" clickable="true" '
                'focusable="true" bounds="[0,63][147,210]"'
            )
            + _node(
                'text="Network &amp; internet" class="android.widget.TextView" content-desc="" bounds="[189,100][700,170]"'
            )
            + _node(
                'text="" class="androidx.recyclerview.widget.RecyclerView" content-desc="" scrollable="true" '
                'bounds="[0,210][1080,2400]"',
                _node(
                    'text="" class="android.widget.LinearLayout" content-desc="" clickable="true" '
                    'bounds="[0,210][1080,400]"',
                    _node(
                        'text="Wi‑Fi" class="android.widget.TextView" content-desc="" bounds="[63,250][400,320]"'
                    )
                    + _node(
                        'text="" class="android.widget.Switch" resource-id="android:id/switch_widget" '
                        'content-desc="" checkable="true" checked="true" clickable="true" bounds="[900,260][1017,350]"'
                    ),
                )
                + _node('text="" class="android.view.View" content-desc="" bounds="[0,400][1080,400]"')
                + _node(
                    'text="hello" class="android.widget.EditText" resource-id="com.android.settings:id/edit" '
                    'content-desc="" clickable="true" focusable="true" focused="true" bounds="[63,420][1017,520]"'
                ),
            ),
        ),
    )
    + "</hierarchy>\nUI hierchary dumped to: /dev/tty\n"
)


def test_parse_real_dump_keeps_actionable_and_labelled_nodes_in_document_order() -> None:
    elements = parse_ui_xml(REAL_DUMP)
    labels = [(el.short_class, el.label) for el in elements]
    assert labels == [
        ("ImageButton", "Navigate up"),
        ("TextView", "Network & internet"),
        ("RecyclerView", ""),
        ("LinearLayout", ""),
        ("TextView", "Wi‑Fi"),
        ("Switch", "switch_widget"),
        ("EditText", "hello"),
    ]
    assert [el.index for el in elements] == list(range(len(elements)))
    switch = elements[5]
    assert switch.checkable and switch.checked and switch.clickable
    assert switch.bounds == (900, 260, 1017, 350)
    assert switch.center == (958, 305)
    edit = elements[6]
    assert edit.editable and edit.focused and edit.resource_id == "com.android.settings:id/edit"
    assert elements[2].scrollable
    # the zero-height View and the bare layout containers are gone
    assert all(el.bounds[3] > el.bounds[1] for el in elements)


def test_keep_all_returns_structural_nodes_too() -> None:
    assert len(parse_ui_xml(REAL_DUMP, keep_all=True)) == len(parse_ui_xml(REAL_DUMP)) + 2


@pytest.mark.parametrize("bad", ["", "ERROR: could not get idle state.", "<hierarchy><node></hierarchy>"])
def test_unusable_dumps_raise_value_error(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_ui_xml(bad)


def test_parse_bounds() -> None:
    assert parse_bounds("[0,63][147,210]") == (0, 63, 147, 210)
    assert parse_bounds("[0,63][147]") is None


element_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)


@st.composite
def elements(draw: st.DrawFn) -> list[UIElement]:
    out = []
    for i in range(draw(st.integers(0, 6))):
        x1, y1 = draw(st.integers(0, 900)), draw(st.integers(0, 2000))
        out.append(
            UIElement(
                index=i,
                text=draw(element_text),
                content_desc=draw(element_text),
                class_name=draw(
                    st.sampled_from(
                        ["android.widget.TextView", "android.widget.EditText", "android.widget.Button"]
                    )
                ),
                resource_id="pkg:id/x",
                package="pkg",
                bounds=(x1, y1, x1 + draw(st.integers(1, 180)), y1 + draw(st.integers(1, 400))),
                clickable=True,
                checkable=draw(st.booleans()),
                checked=draw(st.booleans()),
                focused=draw(st.booleans()),
            )
        )
    return out


@settings(max_examples=200)
@given(elements())
def test_elements_to_xml_round_trips_through_the_parser(els: list[UIElement]) -> None:
    xml = elements_to_xml(els, (1080, 2400))
    parsed = parse_ui_xml(xml)
    assert len(parsed) == len(els)
    for original, back in zip(els, parsed, strict=True):
        assert back.bounds == original.bounds
        assert back.class_name == original.class_name
        assert back.checked == original.checked and back.focused == original.focused
        assert back.editable == ("EditText" in original.class_name)
        # XML 1.0 cannot carry most control characters; everything else survives verbatim
        printable = "".join(
            c for c in original.text if (c >= " " or c in "\t\n\r") and c not in "\ufffe\uffff"
        )
        assert back.text == printable


def test_compact_tree_is_one_short_line_per_element() -> None:
    els = [
        UIElement(
            index=0,
            text="Wi-Fi",
            class_name="android.widget.Switch",
            checkable=True,
            checked=True,
            clickable=True,
        ),
        UIElement(
            index=1,
            text="",
            class_name="android.widget.EditText",
            resource_id="app:id/url",
            editable=True,
            focused=True,
        ),
        UIElement(
            index=2,
            text="line one\nline two " + "x" * 80,
            class_name="android.widget.TextView",
            bounds=(1, 2, 3, 4),
        ),
    ]
    lines = compact_tree(els).split("\n")
    assert len(lines) == 3
    assert lines[0] == '[0] Switch "Wi-Fi" on (0,0,0,0)'
    assert lines[1] == '[1] EditText "url" edit focused (0,0,0,0)'
    assert lines[2].startswith('[2] TextView "line one line two xxx')
    assert lines[2].endswith('…" static (1,2,3,4)')
    assert compact_tree(els, with_bounds=False).split("\n")[0] == '[0] Switch "Wi-Fi" on'
