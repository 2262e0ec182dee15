"""VisualToolBench's web tools against the live providers, as its `VisionTools` calls them (scripts/tools.py at
xi1ngang/VisualToolBench d4f200a): SerpAPI's Google search, a page fetched directly and read with BeautifulSoup,
and OpenWeather's geocoding then current weather (the reference's "historical" weather is the current one: its
historical API needs a paid plan). Each returns the reference's dict; the model reads `str()` of it.

Requests, parameters, timeouts (15 s, 15 s, 10 s) and the dicts follow the reference line by line; the vectors in
tests/eval/benchmarks/data/ prove it (their generators: docs/testing.md). Departures, all deliberate: requests go
through `runtime.web_http` (retries on 429, 5xx, timeouts and dropped connections, which the reference does not
make; the shared cache; the run's budget; a page on a private address is refused), and a key never reaches the
model: an error that quotes one (requests' HTTPError names the URL, key included) has it replaced by "***".
"""

from __future__ import annotations

from runtime.web import LiveProvider
from runtime.web_http import PAGE, WebHttp
from tools.toolset import Reply

KEYS = {"SERP_API_KEY": "google_search, through SerpAPI",
        "OPENWEATHER_API_KEY": "historical_weather, through OpenWeather"}
USER_AGENT = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
              "Chrome/91.0.4472.124 Safari/537.36")


class WebClient:
    def __init__(self, http: WebHttp, keys: dict[str, str]):
        self.http, self.serp_key, self.weather_key = http, keys["SERP_API_KEY"], keys["OPENWEATHER_API_KEY"]

    def google_search(self, query, num_results=5) -> Reply:
        try:
            params = {"api_key": self.serp_key, "q": query, "num": min(num_results, 10), "engine": "google"}
            response = self.http.get("serpapi_search", self.http.endpoint("serpapi_search"), params=params,
                                     timeout=15)
            response.raise_for_status()
            data = self.http.json("serpapi_search", response)
            results = []
            if "organic_results" in data:
                for item in data["organic_results"]:
                    results.append({"title": item.get("title", ""), "snippet": item.get("snippet", ""),
                                    "url": item.get("link", ""), "display_link": item.get("displayed_link", "")})
            return self._reply({"results": results, "query": query, "status": "success",
                                "total_results": data.get("search_information", {}).get("total_results", 0)})
        except Exception as err:  # noqa: BLE001 - the reference answers every failure with its error dict
            return self._reply({"results": [], "query": query, "status": "error", "error": str(err)})

    def browser_get_page_text(self, url) -> Reply:
        from bs4 import BeautifulSoup  # only a live page read needs it (the GPU check's machine lacks it)

        try:
            response = self.http.get(PAGE, url, headers={"User-Agent": USER_AGENT}, timeout=15)
            response.raise_for_status()
            soup = BeautifulSoup(response.content, "html.parser")
            for element in soup(["script", "style", "nav", "header", "footer", "aside"]):
                element.decompose()
            text = soup.get_text()
            lines = (line.strip() for line in text.splitlines())
            chunks = (phrase.strip() for line in lines for phrase in line.split("  "))
            text = " ".join(chunk for chunk in chunks if chunk)
            title = ""
            if soup.title:
                title = soup.title.string
            elif soup.find("h1"):
                title = soup.find("h1").get_text()
            return self._reply({"url": url, "title": title, "text": text[:8000], "status": "success",
                                "content_length": len(text)})
        except Exception as err:  # noqa: BLE001
            return self._reply({"url": url, "title": "", "text": "", "status": "error", "error": str(err)})

    def historical_weather(self, location, date) -> Reply:
        try:
            response = self.http.get("openweather_geocode", self.http.endpoint("openweather_geocode"),
                                     params={"q": location, "limit": 1, "appid": self.weather_key}, timeout=10)
            response.raise_for_status()
            geocode = self.http.json("openweather_geocode", response)
            if not geocode:
                return self._reply({"location": location, "date": date, "status": "error",
                                    "error": "Location not found"})
            lat, lon = geocode[0]["lat"], geocode[0]["lon"]
            response = self.http.get("openweather_current", self.http.endpoint("openweather_current"),
                                     params={"lat": lat, "lon": lon, "appid": self.weather_key, "units": "metric"},
                                     timeout=10)
            response.raise_for_status()
            weather = self.http.json("openweather_current", response)
            return self._reply({
                "location": location, "date": date, "coordinates": f"{lat}, {lon}",
                "temperature": {"current": f"{weather['main']['temp']:.1f}°C",
                                "feels_like": f"{weather['main']['feels_like']:.1f}°C",
                                "min": f"{weather['main']['temp_min']:.1f}°C",
                                "max": f"{weather['main']['temp_max']:.1f}°C"},
                "conditions": weather["weather"][0]["description"], "humidity": f"{weather['main']['humidity']}%",
                "wind_speed": f"{weather['wind']['speed']} m/s", "pressure": f"{weather['main']['pressure']} hPa",
                "status": "success", "note": "Current weather data (historical requires paid plan)"})
        except Exception as err:  # noqa: BLE001
            return self._reply({"location": location, "date": date, "status": "error", "error": str(err)})

    def _reply(self, result: dict) -> Reply:
        return Reply(self.http.redact(str(result)), error=result["status"] == "error")


PROVIDER = LiveProvider("VisualToolBench", KEYS, {}, WebClient)
