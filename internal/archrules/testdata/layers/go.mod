module github.com/awaken-dev/awaken
