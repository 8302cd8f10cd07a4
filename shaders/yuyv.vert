#version 330 core
// The whole viewport as one quad. The fragment shader addresses texels by
// gl_FragCoord, so nothing else is passed on.
layout(location = 0) in vec2 a_pos;

void main() {
    gl_Position = vec4(a_pos * 2.0 - 1.0, 0.0, 1.0);
}
