"""Chrome: URL bar, web search results, articles, and the shop websites
(home -> search -> results -> product -> cart)."""

from __future__ import annotations

from urllib.parse import quote_plus, unquote_plus

from simulators.simdroid.catalog import (
    CHROME,
    SEARCH_DOMAIN,
    SHOP_BY_DOMAIN,
    Product,
    normalize_query,
    normalize_url,
    search_products,
    web_results,
)
from simulators.simdroid.state import DeviceState, Page
from simulators.simdroid.widgets import (
    BUTTON,
    EDIT,
    IMAGE_BUTTON,
    TEXT,
    Layout,
    Screen,
    SubmitHandler,
    TapHandler,
    Widget,
)

URL_FIELD = "chrome.url"
ACTIVITY = f"{CHROME}/com.google.android.apps.chrome.Main"
SHOP_CATEGORIES = ("Today's deals", "Electronics", "Home & kitchen", "Toys")


def page_url(page: Page) -> str:
    name = page["name"]
    if name == "search":
        return f"{SEARCH_DOMAIN}/search?q={quote_plus(page['query'])}"
    if name == "article":
        return f"example.org/{quote_plus(page['title'].lower())}"
    if name == "error":
        return str(page["url"])
    if name == "site":
        domain, view = str(page["domain"]), page["view"]
        if view == "results":
            return f"{domain}/search?q={quote_plus(page['query'])}"
        if view == "product":
            return f"{domain}/p/{product_of(page).product_id.partition(':')[2]}"
        if view == "cart":
            return f"{domain}/cart"
        return domain
    return ""


def product_of(page: Page) -> Product:
    return search_products(page["domain"], page["query"])[page["rank"]]


def site_page(domain: str, view: str = "home", **params: object) -> Page:
    return {"app": CHROME, "name": "site", "domain": domain, "view": view, **params}


def _pushing_site(domain: str, view: str, **params: object) -> TapHandler:
    """A tap handler opening a site page (a fresh page dict per tap, as every push needs)."""
    return lambda state, _x: state.push(site_page(domain, view, **params))


def navigate(state: DeviceState, typed: str) -> None:
    """What pressing Enter in the URL bar does: open a site, or web-search anything else."""
    text = typed.strip()
    if not text:
        return
    url = normalize_url(text)
    if " " in text or "." not in url.partition("/")[0]:
        state.push({"app": CHROME, "name": "search", "query": normalize_query(text)})
        return
    host, _, path = url.partition("/")
    query = unquote_plus(path.partition("search?q=")[2]) if "search?q=" in path else ""
    if host in SHOP_BY_DOMAIN:
        if query:
            state.push(site_page(host, "results", query=normalize_query(query)))
        elif path == "cart":
            state.push(site_page(host, "cart"))
        else:
            state.push(site_page(host))
    elif host == SEARCH_DOMAIN:
        if query:
            state.push({"app": CHROME, "name": "search", "query": normalize_query(query)})
        else:
            state.push({"app": CHROME, "name": "newtab"})
    else:
        state.push({"app": CHROME, "name": "error", "url": url})


def _url_bar(state: DeviceState, page: Page, layout: Layout) -> list[Widget]:
    row = layout.row(1.0)
    return [
        Widget(
            EDIT,
            layout.left(row, 0.85),
            text=page_url(page),
            content_desc="Search or type web address",
            resource_id=f"{CHROME}:id/url_bar",
            field=URL_FIELD,
            on_submit=lambda st: navigate(st, st.fields.get(URL_FIELD, "")),
            style="field",
        ),
        Widget(
            IMAGE_BUTTON,
            layout.right(row, 0.15),
            content_desc="Switch or close tabs",
            resource_id=f"{CHROME}:id/tab_switcher_button",
            on_tap=lambda st, _f: setattr(st, "notice", "Only one tab is open"),
            style="icon",
        ),
    ]


def _open_article(title: str) -> TapHandler:
    return lambda st, _f: st.push({"app": CHROME, "name": "article", "title": title})


def browser_screen(state: DeviceState, page: Page, layout: Layout) -> Screen:
    if page["name"] == "site":
        return shop_screen(state, page, layout)
    widgets = _url_bar(state, page, layout)
    name = page["name"]
    if name == "newtab":
        widgets.append(Widget(TEXT, layout.row(2.0), text="Google", style="title"))
        widgets.append(Widget(TEXT, layout.row(0.8), text="Discover"))
        for headline in ("Top stories this week", "Weather: sunny spells", "Recipe of the day"):
            widgets.append(
                Widget(TEXT, layout.row(1.0), text=headline, on_tap=_open_article(headline), style="row")
            )
    elif name == "search":
        widgets.append(Widget(TEXT, layout.row(0.8), text=f"Results for {page['query']}"))
        for title in web_results(page["query"]):
            widgets.append(
                Widget(
                    TEXT,
                    layout.row(1.2),
                    text=title,
                    resource_id=f"{CHROME}:id/search_result",
                    on_tap=_open_article(title),
                    style="row",
                )
            )
    elif name == "article":
        widgets.append(Widget(TEXT, layout.row(1.5), text=page["title"], style="title"))
        widgets.append(
            Widget(TEXT, layout.row(3.0), text="Lorem ipsum dolor sit amet, consectetur adipiscing.")
        )
    else:  # error
        widgets.append(Widget(TEXT, layout.row(1.5), text="This site can't be reached", style="title"))
        widgets.append(Widget(TEXT, layout.row(1.0), text=f"{page.get('url', '')} could not be found"))
    return Screen(CHROME, ACTIVITY, widgets)


# ------------------------------------------------------------------------------------------------
# Shops


def search_field(domain: str) -> str:
    return f"shop.{domain}.search"


def _submit_search(domain: str) -> SubmitHandler:
    def submit(state: DeviceState) -> None:
        query = normalize_query(state.fields.get(search_field(domain), ""))
        if query:
            state.push(site_page(domain, "results", query=query))

    return submit


def add_to_cart(state: DeviceState, page: Page) -> None:
    product = product_of(page)
    state.carts.setdefault(page["domain"], []).append(
        {"id": product.product_id, "name": product.name, "price_cents": product.price_cents}
    )
    state.notice = "Added to cart"


def shop_screen(state: DeviceState, page: Page, layout: Layout) -> Screen:
    domain, view = page["domain"], page["view"]
    site = SHOP_BY_DOMAIN[domain]
    widgets = _url_bar(state, page, layout)
    header = layout.row(1.0)
    cart_count = len(state.carts.get(domain, []))
    widgets.append(
        Widget(
            TEXT,
            layout.left(header, 0.65),
            text=site.title,
            on_tap=lambda st, _f: st.push(site_page(domain)),
            style="banner",
            color=site.color,
        )
    )
    widgets.append(
        Widget(
            BUTTON,
            layout.right(header, 0.35),
            text=f"Cart ({cart_count})",
            content_desc="Cart",
            resource_id=f"{domain}:id/cart",
            on_tap=lambda st, _f: st.push(site_page(domain, "cart")),
            style="button",
        )
    )
    search_row = layout.row(1.0)
    submit = _submit_search(domain)
    widgets.append(
        Widget(
            EDIT,
            layout.left(search_row, 0.75),
            text=page.get("query", "") if view == "results" else "",
            content_desc=f"Search {site.title}",
            resource_id=f"{domain}:id/search",
            field=search_field(domain),
            on_submit=submit,
            style="field",
        )
    )
    widgets.append(
        Widget(
            BUTTON,
            layout.right(search_row, 0.25),
            text="Search",
            resource_id=f"{domain}:id/search_button",
            on_tap=lambda st, _f: submit(st),
            style="button",
        )
    )
    if view == "home":
        widgets.append(Widget(TEXT, layout.row(0.8), text=f"Welcome to {site.title}"))
        for category in SHOP_CATEGORIES:
            widgets.append(
                Widget(
                    TEXT,
                    layout.row(1.0),
                    text=category,
                    on_tap=_pushing_site(domain, "results", query=normalize_query(category)),
                    style="row",
                )
            )
    elif view == "results":
        widgets.append(Widget(TEXT, layout.row(0.8), text=f'Results for "{page["query"]}"'))
        for rank, product in enumerate(search_products(domain, page["query"])):
            widgets.append(
                Widget(
                    TEXT,
                    layout.row(1.3),
                    text=f"{product.name} {product.price}",
                    resource_id=f"{domain}:id/product_title",
                    on_tap=_pushing_site(domain, "product", query=page["query"], rank=rank),
                    style="row",
                )
            )
    elif view == "product":
        product = product_of(page)
        widgets.append(Widget(TEXT, layout.row(1.5), text=product.name, style="title"))
        widgets.append(Widget(TEXT, layout.row(0.8), text=product.price))
        widgets.append(
            Widget(
                BUTTON,
                layout.row(1.2),
                text="Add to cart",
                resource_id=f"{domain}:id/add_to_cart",
                on_tap=lambda st, _f: add_to_cart(st, page),
                style="button",
                color=site.color,
            )
        )
        widgets.append(
            Widget(
                BUTTON,
                layout.row(1.2),
                text="Buy now",
                resource_id=f"{domain}:id/buy_now",
                on_tap=lambda st, _f: setattr(st, "notice", "Sign in to buy"),
                style="button",
            )
        )
    else:  # cart
        items = state.carts.get(domain, [])
        widgets.append(Widget(TEXT, layout.row(0.8), text=f"Your cart: {len(items)} item(s)"))
        for item in items[:6]:
            widgets.append(
                Widget(TEXT, layout.row(1.0), text=item["name"], resource_id=f"{domain}:id/cart_item")
            )
        if items:
            widgets.append(
                Widget(
                    BUTTON,
                    layout.row(1.2),
                    text="Checkout",
                    on_tap=lambda st, _f: setattr(st, "notice", "Sign in to check out"),
                    style="button",
                )
            )
    return Screen(CHROME, ACTIVITY, widgets, background=(255, 255, 255))
