// The API page: Swagger UI over this origin's OpenAPI document (edge serves the same one).
window.addEventListener("load", () => {
  window.ui = SwaggerUIBundle({
    url: "/api/edge/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    tryItOutEnabled: true,
  });
});
